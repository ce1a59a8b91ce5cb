"""driver role, source ubuntu, beside NVIDIA's CUDA repository: the Ubuntu archive's exact builds
are installed, held and pinned, though NVIDIA's build of the same version has a higher revision,
and Canonical's prebuilt module is chosen (apt was asked with the pin in place)."""

import pytest

UBUNTU = "535.288.01-0ubuntu0.22.04.1"
NVIDIA = "535.288.01-0ubuntu1"
NVIDIA_1 = "535.288.01-1"
STACK = [
    "nvidia-headless-no-dkms-535",
    "nvidia-utils-535",
    "libnvidia-compute-535",
    "nvidia-compute-utils-535",
    "nvidia-kernel-common-535",
    "nvidia-kernel-source-535",
    "nvidia-fabricmanager-535",
    "libnvidia-nscq-535",
]


@pytest.mark.parametrize("name", STACK)
def test_the_ubuntu_archives_build_installed_and_held(host, name):
    assert host.package(name).version == UBUNTU
    assert host.check_output(f"dpkg --get-selections {name}").split() == [name, "hold"]


def test_no_package_from_nvidias_repository(host):
    installed = host.check_output("dpkg-query -W -f '${Package} ${Version}\\n'").splitlines()
    assert [x for x in installed if x.endswith((f" {NVIDIA}", f" {NVIDIA_1}"))] == []


def test_pin_names_the_ubuntu_build_not_a_glob(host):
    pref = host.file("/etc/apt/preferences.d/gpufix-nvidia-driver.pref")
    assert pref.contains(f"^Pin: version {UBUNTU}$")
    assert not pref.contains("^Pin: version .*\\*")
    assert pref.contains("^Package: nvidia-fabricmanager-535$")
    assert pref.contains("^Package: libnvidia-nscq-535$")
    assert pref.contains("^Pin-Priority: 1001$")


@pytest.mark.parametrize(
    ("name", "theirs"),
    [
        ("nvidia-utils-535", NVIDIA),
        ("libnvidia-compute-535", NVIDIA),
        ("nvidia-fabricmanager-535", NVIDIA_1),
    ],
)
def test_apt_prefers_the_ubuntu_build_over_nvidias_higher_revision(host, name, theirs):
    policy = host.check_output(f"apt-cache policy {name}")
    assert f"Candidate: {UBUNTU}" in policy
    assert f"{theirs} 500" in policy  # NVIDIA's build is offered, unpinned


def test_cuda_repository_left_in_place(host):
    assert host.file("/etc/apt/sources.list.d/cuda-ubuntu2204-x86_64.list").exists
    res = host.run("apt-get update")
    assert res.rc == 0, res.stderr


def test_canonicals_prebuilt_module_not_dkms(host):
    assert host.package("linux-modules-nvidia-535-5.15.0-151-generic").is_installed
    assert host.package("linux-modules-nvidia-535-generic").is_installed
    assert not host.package("nvidia-dkms-535").is_installed
