"""driver role, noble, open kernel modules (580-server-open, prebuilt), fabric manager 580."""

import pytest

VERSION = "580.126.20-0ubuntu0.24.04.2"


@pytest.mark.parametrize(
    "name",
    [
        "nvidia-headless-no-dkms-580-server-open",
        "nvidia-kernel-source-580-server-open",
        "nvidia-kernel-common-580-server",
        "libnvidia-compute-580-server",
        "nvidia-utils-580-server",
        "nvidia-fabricmanager-580",
        "libnvidia-nscq-580",
    ],
)
def test_open_stack_at_one_version_and_held(host, name):
    assert host.package(name).version == VERSION
    assert host.check_output(f"dpkg --get-selections {name}").split() == [name, "hold"]


def test_prebuilt_open_modules_not_the_proprietary_ones(host):
    assert host.package("linux-modules-nvidia-580-server-open-6.8.0-136-generic").is_installed
    assert host.package("linux-modules-nvidia-580-server-open-generic").is_installed
    assert not host.package("nvidia-kernel-source-580-server").is_installed
    assert not host.package("dkms").is_installed


def test_fabric_manager_enabled_waiting_for_the_reboot(host):
    fm = host.service("nvidia-fabricmanager")
    assert fm.is_enabled
    assert not fm.is_running  # no module loaded yet: it starts after the reboot
