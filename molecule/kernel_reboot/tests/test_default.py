"""kernel role after a reboot into the HWE kernel (simulated boot in a container restart)."""

ENTRY = "Advanced options for Ubuntu>Ubuntu, with Linux {}"


def test_booted_the_target_kernel(host):
    assert host.check_output("gpufix-bootsim-uname") == "5.4.0-150-generic"


def test_container_really_restarted(host):
    # bootsim writes /run/gpufix-bootsim/kernel at boot; /run is a tmpfs a restart empties, so
    # the one-shot entry was consumed by a real restart, not by a call before it.
    env = host.check_output("grub-editenv list")
    assert "next_entry" not in env


def test_new_kernel_is_now_the_saved_default(host):
    env = host.check_output("grub-editenv list").splitlines()
    assert "saved_entry=" + ENTRY.format("5.4.0-150-generic") in env


def test_grub_default_saved_and_regenerated_once(host):
    assert host.file("/etc/default/grub").contains("^GRUB_DEFAULT=saved$")
    assert host.file("/var/lib/gpufix-bootsim/update-grub.count").content_string.strip() == "1"


def test_fallback_kernel_still_installed_and_manual(host):
    assert host.package("linux-image-4.15.0-213-generic").is_installed
    assert "linux-image-4.15.0-213-generic" in host.check_output("apt-mark showmanual").split()
