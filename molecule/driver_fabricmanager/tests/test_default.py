"""driver role, NVSwitch host: fabric manager and NSCQ at the driver's exact version, running."""

import pytest

VERSION = "535.288.01-0ubuntu0.22.04.1"


@pytest.mark.parametrize(
    "name",
    [
        "nvidia-fabricmanager-535",
        "libnvidia-nscq-535",
        "libnvidia-compute-535-server",
        "nvidia-headless-no-dkms-535-server",
        "nvidia-utils-535-server",
    ],
)
def test_exactly_the_drivers_version_and_held(host, name):
    assert host.package(name).version == VERSION
    assert host.check_output(f"dpkg --get-selections {name}").split() == [name, "hold"]


def test_fabric_manager_enabled_and_running_at_the_drivers_version(host):
    fm = host.service("nvidia-fabricmanager")
    assert fm.is_enabled
    assert fm.is_running
    assert host.file("/run/nvidia-fabricmanager/version").content_string.strip() == "535.288.01"


def test_canonical_signed_modules_not_dkms(host):
    assert host.package("linux-modules-nvidia-535-server-5.15.0-151-generic").is_installed
    assert host.package("linux-modules-nvidia-535-server-generic").is_installed
    assert not host.package("dkms").is_installed
    assert not host.package("nvidia-dkms-535-server").is_installed


def test_persistence_daemon_running_in_persistence_mode(host):
    assert host.service("nvidia-persistenced").is_running
    args = host.file("/run/nvidia-persistenced/args").content_string
    assert "--persistence-mode" in args
    assert "--no-persistence-mode" not in args


def test_nvidia_smi_works(host):
    assert host.check_output("nvidia-smi --query-gpu=driver_version").split() == [
        "535.288.01",
        "535.288.01",
    ]
