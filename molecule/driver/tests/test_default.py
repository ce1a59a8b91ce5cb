"""driver role: pin beats the newer version, holds survive upgrades, u-u blacklist."""

import pytest

PINNED = "535.183.01-0ubuntu0.18.04.1"
NEWER = "535.216.01-0ubuntu0.18.04.1"
DRIVER_PACKAGES = [
    "nvidia-driver-535",
    "nvidia-utils-535",
    "libnvidia-compute-535",
    "nvidia-kernel-common-535",
    "nvidia-dkms-535",
]


@pytest.mark.parametrize("name", DRIVER_PACKAGES)
def test_pinned_version_installed_after_upgrades(host, name):
    assert host.package(name).version == PINNED


def test_fabricmanager_pinned_too(host):
    assert host.package("nvidia-fabricmanager-535").version == "535.183.01-1"


def test_pin_beats_the_newer_version(host):
    policy = host.check_output("apt-cache policy nvidia-driver-535")
    assert f"Candidate: {PINNED}" in policy
    assert NEWER in policy  # the newer one is there and loses
    pref = host.file("/etc/apt/preferences.d/gpufix-nvidia-driver.pref")
    assert pref.contains("^Pin: version 535.183.01-\\*$")
    assert pref.contains("^Pin-Priority: 1001$")


@pytest.mark.parametrize("name", [*DRIVER_PACKAGES, "nvidia-fabricmanager-535"])
def test_held(host, name):
    selections = host.check_output(f"dpkg --get-selections {name}").split()
    assert selections == [name, "hold"]


def test_unattended_upgrades_blacklist(host):
    dump = host.check_output("apt-config dump Unattended-Upgrade::Package-Blacklist")
    assert '"^nvidia-"' in dump
    assert '"^libnvidia-"' in dump


def test_repository_is_deb822(host):
    src = host.file("/etc/apt/sources.list.d/gpufix-nvidia-cuda.sources")
    assert src.contains("^URIs: file:/srv/localrepo$")
    assert src.contains("^Trusted: yes$")


def test_nvidia_smi_stub_reports_pinned_version(host):
    out = host.check_output("nvidia-smi --query-gpu=driver_version --format=csv,noheader")
    assert out.split() == ["535.183.01", "535.183.01"]
