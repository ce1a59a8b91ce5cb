"""container_runtime on a host with Docker's and NVIDIA's lists already there (the toolkit's,
cuda-keyring's and the graphics-drivers PPA): reuse, no conflict, nothing else touched."""

PREPARED = [
    "cuda-ubuntu2204-x86_64.list",
    "docker.list",
    "graphics-drivers-ubuntu-ppa-jammy.list",
    "nvidia-container-toolkit.list",
]


def test_no_second_entry(host):
    files = sorted(host.file("/etc/apt/sources.list.d").listdir())
    assert files == PREPARED
    res = host.run("apt-get update")
    assert res.rc == 0, res.stderr
    assert "Conflicting" not in res.stderr


def test_packages_installed_at_the_pinned_versions(host):
    assert host.package("docker-ce").version == "5:24.0.7-1~ubuntu.22.04~jammy"
    assert host.package("nvidia-container-toolkit").version == "1.17.8-1"
    assert host.package("libnvidia-container-tools").version == "1.17.8-1"


def test_no_key_was_downloaded(host):
    assert sorted(host.file("/etc/apt/keyrings").listdir()) == ["docker.asc"]


def test_the_driver_sources_are_left_alone(host):
    cuda = host.file("/etc/apt/sources.list.d/cuda-ubuntu2204-x86_64.list")
    assert "signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg" in cuda.content_string
    ppa = host.file("/etc/apt/sources.list.d/graphics-drivers-ubuntu-ppa-jammy.list")
    assert ppa.content_string.startswith("deb [trusted=yes] file:/srv/localrepo/ppa.")
    assert host.package("cuda-keyring").is_installed
