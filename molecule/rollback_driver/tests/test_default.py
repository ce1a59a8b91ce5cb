"""After playbooks/rollback.yml: the driver is back at 535.183.01, unpinned and not held."""

PACKAGES = (
    "nvidia-driver-535",
    "nvidia-utils-535",
    "libnvidia-compute-535",
    "nvidia-kernel-common-535",
    "nvidia-dkms-535",
)


def test_every_driver_package_is_back_at_the_old_version(host):
    for name in PACKAGES:
        assert host.package(name).version == "535.183.01-0ubuntu0.18.04.1", name


def test_the_pin_is_gone_and_nothing_is_held(host):
    assert not host.file("/etc/apt/preferences.d/gpufix-nvidia-driver.pref").exists
    held = host.check_output("apt-mark showhold").split()
    assert not set(PACKAGES) & set(held), held


def test_the_old_versions_files_are_in_place(host):
    marker = host.file("/usr/share/gpufix-fixture/libnvidia-compute-535.version")
    assert marker.content_string.strip() == "535.183.01"


def test_the_running_kernels_headers_went_its_image_stayed(host):
    assert not host.package("linux-headers-5.4.0-150-generic").is_installed
    assert host.package("linux-image-5.4.0-150-generic").is_installed
