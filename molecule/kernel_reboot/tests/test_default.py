"""kernel role after a one-shot reboot into the HWE kernel (simulated boot in a container
restart), before the finalize phase: the new kernel runs, the old one is still GRUB's default."""

ENTRY = "Advanced options for Ubuntu>Ubuntu, with Linux {}"


def test_booted_the_target_kernel(host):
    assert host.check_output("gpufix-bootsim-uname") == "5.4.0-150-generic"


def test_container_really_restarted(host):
    # bootsim writes /run/gpufix-bootsim/kernel at boot; /run is a tmpfs a restart empties, so
    # the one-shot entry was consumed by a real restart, not by a call before it.
    assert "next_entry" not in host.check_output("grub-editenv list")


def test_previous_kernel_stays_the_saved_default_until_finalize(host):
    env = host.check_output("grub-editenv list").splitlines()
    assert "saved_entry=" + ENTRY.format("4.15.0-213-generic") in env


def test_one_shot_drop_in_arms_an_unattended_fallback(host):
    dropin = host.file("/etc/default/grub.d/99-gpufix-kernel.cfg")
    assert dropin.contains("^GRUB_DEFAULT=saved$")
    assert dropin.contains("^GRUB_RECORDFAIL_TIMEOUT=10$")
    # sourced after the cloud image's 50-cloudimg-settings.cfg, so it wins in grub.cfg
    generated = host.file("/var/lib/gpufix-bootsim/grub.cfg").content_string.splitlines()
    assert "GRUB_DEFAULT=saved" in generated
    assert "GRUB_RECORDFAIL_TIMEOUT=10" in generated
    # the host's own settings are not edited
    assert host.file("/etc/default/grub").contains("^GRUB_DEFAULT=0$")
    assert host.file("/var/lib/gpufix-bootsim/update-grub.count").content_string.strip() == "1"


def test_the_module_that_allowed_the_reboot_is_the_signed_prebuilt_one(host):
    out = host.check_output("modinfo -k 5.4.0-150-generic nvidia")
    assert "kernel/nvidia-535/nvidia.ko" in out
    assert "signer:         Canonical Ltd. Kernel Module Signing" in out
    assert host.package("libnvidia-compute-535").version.startswith("535.183.01-")


def test_fallback_kernel_still_installed_and_manual(host):
    manual = host.check_output("apt-mark showmanual").split()
    assert host.package("linux-image-4.15.0-213-generic").is_installed
    assert "linux-image-4.15.0-213-generic" in manual
    # its prebuilt NVIDIA module too (refuse.yml marked it automatic): the fallback keeps a driver
    assert "linux-modules-nvidia-535-4.15.0-213-generic" in manual
    # recorded, so that finalize marks them automatic again (finalize.yml)
    marked = host.file("/var/lib/gpufix/kernel-marked-manual").content_string.splitlines()
    assert {"linux-image-4.15.0-213-generic", "linux-modules-nvidia-535-4.15.0-213-generic"} <= set(
        marked
    )


def test_role_installed_canonicals_module_for_the_new_kernel_without_moving_the_driver(host):
    # The host used Canonical's prebuilt modules for its GA kernel (refuse.yml's last step); the
    # role added the HWE kernel's module and the flavour metapackage that follows the HWE kernel.
    assert host.package("linux-modules-nvidia-535-4.15.0-213-generic").is_installed
    assert host.package("linux-modules-nvidia-535-5.4.0-150-generic").is_installed
    assert host.package("linux-modules-nvidia-535-generic-hwe-18.04").is_installed
    for name in ("nvidia-driver-535", "nvidia-kernel-common-535", "libnvidia-compute-535"):
        assert host.package(name).version == "535.183.01-0ubuntu0.18.04.1", name
