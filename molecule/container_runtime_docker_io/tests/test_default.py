"""docker.io kept with its container; the toolkit added beside it; docker-ce never installed."""

import json


def test_the_ubuntu_engine_is_still_there(host):
    for name in ("docker.io", "containerd", "runc"):
        assert host.package(name).is_installed, name
    for name in ("docker-ce", "docker-ce-cli", "containerd.io"):
        assert not host.package(name).is_installed, name


def test_the_toolkit_is_installed_and_registered(host):
    assert host.package("nvidia-container-toolkit").version == "1.17.7-1"
    daemon = json.loads(host.file("/etc/docker/daemon.json").content_string)
    assert daemon["runtimes"]["nvidia"]["path"] == "nvidia-container-runtime"


def test_dockerd_was_reloaded_never_restarted(host):
    assert host.service("docker").is_running
    log = host.file("/var/lib/gpufix-fixture/dockerd-starts").content_string.splitlines()
    # Started once by docker.io's postinst; the role's daemon.json reached it by SIGHUP.
    assert log == ["start default-shm-size=64M", "reload default-shm-size=64M"]
    info = json.loads(host.check_output("docker info --format '{{json .}}'"))
    assert info["Runtimes"]["nvidia"] == {"path": "nvidia-container-runtime"}


def test_no_docker_repository_was_added(host):
    assert not host.file("/etc/apt/sources.list.d/docker.sources").exists
