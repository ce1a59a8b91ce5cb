"""pcie_acs role: ACS cleared and read back at boot on the bridges that have it; IOMMU flags in a
grub.d drop-in that survives the cloud image's override, in the booted command line."""

SETTING = "ECAP_ACS+0x6.w=0000"
REG = "ECAP_ACS+0x6.w"
WITH_ACS = ["0000:40:03.1", "0000:41:00.0"]


def test_setpci_comes_from_the_archives_pciutils(host):
    # The bare image had no setpci: the role installed pciutils (with libpci3, its exact-version
    # dependency) from bionic-updates, and the unit runs /usr/bin/setpci from it.
    for name in ("pciutils", "libpci3"):
        assert host.package(name).version == "1:3.5.2-1ubuntu1.1"
    assert host.check_output("dpkg -S /usr/bin/setpci").startswith("pciutils: ")
    policy = host.check_output("apt-cache policy pciutils")
    assert "archive.ubuntu.com/ubuntu bionic-updates/main" in policy
    unit = host.file("/etc/systemd/system/gpufix-pcie-acs.service")
    assert unit.contains(" /usr/bin/setpci ECAP_ACS+0x6.w 0000 ")


def test_unit_enabled_and_ran_at_boot(host):
    svc = host.service("gpufix-pcie-acs")
    assert svc.is_enabled
    result = host.run("systemctl show -p ActiveState -p Result gpufix-pcie-acs")
    assert "ActiveState=active" in result.stdout
    assert "Result=success" in result.stdout
    # systemd's own check of the unit file: no unknown keys, no ordering on a unit nothing
    # starts (systemd-udev-settle), the start command executable
    verify = host.run("systemd-analyze verify /etc/systemd/system/gpufix-pcie-acs.service")
    assert verify.rc == 0 and "gpufix-pcie-acs" not in verify.stderr, verify.stderr
    assert "udev-settle" not in host.check_output("systemctl show -p After gpufix-pcie-acs")


def test_setpci_after_the_reboot_skips_the_bridge_without_acs(host):
    # side_effect emptied the log, put ACS back on and rebooted: these lines come from the unit.
    lines = host.file("/var/lib/gpufix-fixture/setpci.log").content_string.splitlines()
    expected = [f"-s 0000:00:01.0 {REG}"]  # the capability check fails: nothing written
    for bdf in WITH_ACS:
        expected += [f"-s {bdf} {REG}", f"-s {bdf} {SETTING}", f"-s {bdf} {REG}"]
    assert lines == expected


def test_bridges_with_acs_read_back_0000(host):
    for bdf in WITH_ACS:
        assert host.file(f"/var/lib/gpufix-fixture/pci/{bdf}").content_string.strip() == "0000"
    log = host.run("journalctl -b -u gpufix-pcie-acs --no-pager").stdout
    assert "0000:00:01.0 has no ACS capability: skipped" in log


def _flags(host):
    vendor = host.check_output("grep -m1 vendor_id /proc/cpuinfo | awk '{print $3}'")
    # iommu=pt only: intel_iommu=on would make the kernel ask for ACS on every bridge
    return {"GenuineIntel": ["iommu=pt"], "AuthenticAMD": ["iommu=pt"]}[vendor]


def test_flags_in_a_drop_in_and_grub_defaults_untouched(host):
    dropin = host.file("/etc/default/grub.d/99-gpufix-iommu.cfg")
    flags = " ".join(_flags(host))
    assert dropin.contains(f'^GRUB_CMDLINE_LINUX_DEFAULT="${{GRUB_CMDLINE_LINUX_DEFAULT}} {flags}"$')
    assert host.file("/etc/default/grub").contains('^GRUB_CMDLINE_LINUX_DEFAULT="quiet splash"$')


def test_booted_command_line_has_the_cloud_image_settings_and_the_flags(host):
    # update-grub (the stand-in sources the files as grub-mkconfig does) and the simulated boot
    cmdline = host.file("/run/gpufix-bootsim/cmdline").content_string.split()
    assert "console=ttyS0" in cmdline  # 50-cloudimg-settings.cfg still wins over /etc/default/grub
    assert "quiet" not in cmdline
    for flag in _flags(host):
        assert flag in cmdline


def test_update_grub_ran_exactly_once(host):
    # converge wrote the drop-in once; the check run, the idempotence run and the reboots did not.
    count = host.file("/var/lib/gpufix-bootsim/update-grub.count").content_string.strip()
    assert count == "1"
