"""driver role, bionic archive, bare image: DKMS path, pin, hold, nouveau, persistence daemon."""

import pytest

VERSION = "535.288.01-0ubuntu0.18.04.1"
STACK = [
    "nvidia-headless-535",
    "nvidia-headless-no-dkms-535",
    "nvidia-dkms-535",
    "nvidia-kernel-common-535",
    "nvidia-kernel-source-535",
    "nvidia-firmware-535-535.288.01",
    "libnvidia-compute-535",
    "nvidia-compute-utils-535",
    "nvidia-utils-535",
]


@pytest.mark.parametrize("name", STACK)
def test_stack_installed_at_the_archive_version_and_held(host, name):
    assert host.package(name).version == VERSION
    assert host.check_output(f"dpkg --get-selections {name}").split() == [name, "hold"]


def test_dkms_builds_the_module_and_no_desktop_stack(host):
    assert host.package("dkms").is_installed
    assert not host.package("nvidia-driver-535").is_installed
    assert not host.package("xserver-xorg-video-nvidia-535").is_installed


# converge: the HWE kernel the host runs and its flavour's metapackage; side_effect: the GA
# kernel, as the running one while 5.4.0-150 waits for a one-shot boot.
HEADERS = [
    "linux-headers-5.4.0-150-generic",
    "linux-headers-generic-hwe-18.04",
    "linux-headers-4.15.0-213-generic",
]


@pytest.mark.parametrize("name", HEADERS)
def test_kernel_headers_installed_and_not_held(host, name):
    assert host.package(name).is_installed
    assert host.check_output(f"dpkg --get-selections {name}").split() == [name, "install"]


def test_headers_are_not_pinned(host):
    policy = host.check_output("apt-cache policy linux-headers-generic-hwe-18.04")
    assert "1001" not in policy


@pytest.mark.parametrize("kernel", ["5.4.0-150-generic", "4.15.0-213-generic"])
def test_dkms_built_the_module_for_each_kernel_the_host_will_run(host, kernel):
    assert host.check_output(f"modinfo -k {kernel} -F version nvidia") == "535.288.01"
    assert host.check_output(f"modinfo -k {kernel} -F filename nvidia") == (
        f"/lib/modules/{kernel}/updates/dkms/nvidia.ko"
    )
    assert f"nvidia/535.288.01, {kernel}, x86_64: installed" in host.check_output(
        f"dkms status -k {kernel}"
    )


def test_no_helper_was_needed(host):
    # The bare image has no python3-debian; the role must not need it (nor install it).
    assert not host.package("python3-debian").is_installed
    assert not host.file("/etc/apt/sources.list.d").listdir()


def test_pin(host):
    pref = host.file("/etc/apt/preferences.d/gpufix-nvidia-driver.pref")
    # The archive's exact build, not 535.288.01-*: a glob would rank another source's build of
    # the same version (NVIDIA's -0ubuntu1) alike, and apt would take its higher revision.
    assert pref.contains(f"^Pin: version {VERSION}$")
    assert not pref.contains("^Pin: version .*\\*")
    assert pref.contains("^Pin-Priority: 1001$")
    assert f"Candidate: {VERSION}" in host.check_output("apt-cache policy nvidia-utils-535")


def test_unattended_upgrades_blacklist(host):
    dump = host.check_output("apt-config dump Unattended-Upgrade::Package-Blacklist")
    assert '"^nvidia-(?!container)"' in dump
    assert '"^libnvidia-(?!container)"' in dump


def test_nouveau_blacklisted_and_initramfs_rebuilt_once(host):
    conf = host.file("/etc/modprobe.d/gpufix-blacklist-nouveau.conf")
    assert conf.contains("^blacklist nouveau$")
    assert conf.contains("^options nouveau modeset=0$")
    log = host.file("/var/lib/gpufix-fixture/update-initramfs.log").content_string.splitlines()
    # every installed kernel's: the next boot may be the running (fallback) kernel, not the newest
    assert log == ["-u -k all"]


def test_persistence_daemon_configured_but_not_started_before_the_reboot(host):
    dropin = host.file("/etc/systemd/system/nvidia-persistenced.service.d/gpufix.conf")
    assert dropin.contains("--persistence-mode")
    # The loaded module (535.183.01) is not the installed userspace: the daemon would fail now.
    assert not host.service("nvidia-persistenced").is_running


def test_nvidia_smi_reports_the_mismatch_until_the_reboot(host):
    res = host.run("nvidia-smi")
    assert res.rc == 18
    assert "Driver/library version mismatch" in res.stdout
