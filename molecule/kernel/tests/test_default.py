"""kernel role without a reboot, on the bionic-identity container."""


def test_hwe_metapackages_installed(host):
    for name in ("linux-generic-hwe-18.04", "linux-headers-generic-hwe-18.04"):
        assert host.package(name).is_installed, name
    assert host.package("linux-image-5.4.0-150-generic").is_installed
    assert host.package("linux-headers-5.4.0-150-generic").is_installed


def test_running_kernel_kept_as_fallback(host):
    manual = host.check_output("apt-mark showmanual").split()
    assert "linux-image-4.15.0-213-generic" in manual
    # autoremove would now keep it
    sim = host.run("apt-get -s autoremove")
    assert "linux-image-4.15.0-213-generic" not in sim.stdout


def test_no_reboot_without_permission(host):
    assert host.check_output("gpufix-bootsim-uname") == "4.15.0-213-generic"
    assert "next_entry" not in host.check_output("grub-editenv list")
    assert host.file("/etc/default/grub").contains("^GRUB_DEFAULT=0$")
    assert not host.file("/etc/default/grub.d/99-gpufix-kernel.cfg").exists
    assert not host.file("/var/lib/gpufix-bootsim/update-grub.count").exists
