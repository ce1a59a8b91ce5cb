"""driver role on a host set up the NVIDIA way: reuse cuda-keyring's list, PPA kept out, pin+hold."""

import pytest

PINNED = "550.54.15-0ubuntu1"
STACK = [
    "nvidia-driver-550",
    "nvidia-dkms-550",
    "nvidia-kernel-common-550",
    "libnvidia-compute-550",
    "nvidia-utils-550",
    "nvidia-compute-utils-550",
]


def test_one_entry_for_nvidias_repository(host):
    files = sorted(host.file("/etc/apt/sources.list.d").listdir())
    assert files == [
        "cuda-ubuntu2204-x86_64.list",
        "graphics-drivers-ubuntu-ppa-jammy.list",
        "nvidia-container-toolkit.list",
    ]
    # apt reads its sources without "Conflicting values set for option Signed-By".
    res = host.run("apt-get update")
    assert res.rc == 0, res.stderr
    assert "Conflicting" not in res.stderr


@pytest.mark.parametrize("name", STACK)
def test_pinned_version_installed_from_nvidia_and_held(host, name):
    assert host.package(name).version == PINNED
    assert host.check_output(f"dpkg --get-selections {name}").split() == [name, "hold"]


def test_pin_beats_nvidias_newer_version_and_the_ppa(host):
    policy = host.check_output("apt-cache policy nvidia-driver-550")
    assert f"Candidate: {PINNED}" in policy
    assert "550.90.07-0ubuntu1" in policy
    assert "550.120-0ubuntu0~gpu22.04.1 -1" in policy  # the PPA, pinned away
    ppa = host.file("/etc/apt/preferences.d/gpufix-graphics-drivers-ppa.pref")
    assert ppa.contains("^Pin: release o=LP-PPA-graphics-drivers$")
    assert ppa.contains("^Pin-Priority: -1$")


def test_cuda_drivers_and_extras_move_with_the_driver(host):
    pref = host.file("/etc/apt/preferences.d/gpufix-nvidia-driver.pref")
    assert pref.contains("^Package: .*cuda-drivers\\*")
    assert pref.contains("^Package: .*libxnvctrl\\*")
    # NVIDIA's exact build first; the rest of the version (cuda-drivers-550 at 550.54.15-1) one
    # priority below, so another source's build of 550.54.15 never ranks with NVIDIA's.
    assert pref.contains(f"^Pin: version {PINNED}$")
    assert pref.contains("^Pin: version 550.54.15-\\*$")
    assert pref.contains("^Pin-Priority: 1000$")


def test_keyring_and_toolkit_list_untouched(host):
    cuda = host.file("/etc/apt/sources.list.d/cuda-ubuntu2204-x86_64.list")
    assert cuda.contains("signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg")
    assert host.package("cuda-keyring").is_installed


@pytest.mark.parametrize("name", ["linux-headers-5.15.0-151-generic", "linux-headers-generic"])
def test_kernel_headers_installed_and_not_held(host, name):
    assert host.package(name).is_installed
    assert host.check_output(f"dpkg --get-selections {name}").split() == [name, "install"]


def test_dkms_built_the_module_for_the_running_kernel(host):
    kernel = "5.15.0-151-generic"
    assert host.check_output(f"modinfo -k {kernel} -F version nvidia") == "550.54.15"
    assert host.check_output(f"modinfo -k {kernel} -F filename nvidia") == (
        f"/lib/modules/{kernel}/updates/dkms/nvidia.ko"
    )
