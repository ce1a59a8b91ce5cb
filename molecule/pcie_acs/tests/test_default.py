"""pcie_acs role: unit applied the setpci writes at boot; GRUB edit idempotent, update-grub once."""

SETTING = "ECAP_ACS+0x6.w=0000"


def test_unit_enabled_and_ran_at_boot(host):
    svc = host.service("gpufix-pcie-acs")
    assert svc.is_enabled
    result = host.run("systemctl show -p ActiveState -p Result gpufix-pcie-acs")
    assert "ActiveState=active" in result.stdout
    assert "Result=success" in result.stdout


def test_setpci_saw_each_bridge_once_after_the_reboot(host):
    # side_effect emptied the log and rebooted: these lines come from the unit at boot.
    lines = host.file("/var/lib/gpufix-fixture/setpci.log").content_string.splitlines()
    assert lines == [f"-s 0000:00:01.0 {SETTING}", f"-s 0000:40:03.1 {SETTING}"]


def test_grub_cmdline_has_passthrough_flags(host):
    vendor = host.check_output("grep -m1 vendor_id /proc/cpuinfo | awk '{print $3}'")
    expected = {
        "GenuineIntel": "quiet splash iommu=pt intel_iommu=on",
        "AuthenticAMD": "quiet splash iommu=pt",
    }[vendor]
    grub = host.file("/etc/default/grub")
    assert grub.contains(f'^GRUB_CMDLINE_LINUX_DEFAULT="{expected}"$')
    assert not grub.contains("iommu=off")


def test_update_grub_ran_exactly_once(host):
    # converge changed the line once; the check run, the idempotence run and the reboot did not.
    count = host.file("/var/lib/gpufix-bootsim/update-grub.count").content_string.strip()
    assert count == "1"
    assert host.file("/var/lib/gpufix-bootsim/grub.cfg").contains("iommu=pt")
