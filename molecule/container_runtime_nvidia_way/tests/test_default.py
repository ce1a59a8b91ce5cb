"""container_runtime on a host with Docker's and NVIDIA's lists already there: reuse, no conflict."""


def test_no_second_entry(host):
    files = sorted(host.file("/etc/apt/sources.list.d").listdir())
    assert files == ["docker.list", "nvidia-container-toolkit.list"]
    res = host.run("apt-get update")
    assert res.rc == 0, res.stderr
    assert "Conflicting" not in res.stderr


def test_packages_installed_at_the_pinned_versions(host):
    assert host.package("docker-ce").version == "5:24.0.7-1~ubuntu.22.04~jammy"
    assert host.package("nvidia-container-toolkit").version == "1.17.8-1"
    assert host.package("libnvidia-container-tools").version == "1.17.8-1"


def test_no_key_was_downloaded(host):
    assert sorted(host.file("/etc/apt/keyrings").listdir()) == ["docker.asc"]
