"""container_runtime on a bare bionic-identity container, with stub docker / dockerd / nvidia-ctk."""

import json

import pytest

IMAGE = (
    "nvcr.io/nvidia/pytorch:23.10-py3@sha256:"
    "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
)
CALLS = "/var/lib/gpufix-fixture/docker"
TOOLKIT = [
    "nvidia-container-toolkit",
    "nvidia-container-toolkit-base",
    "libnvidia-container-tools",
    "libnvidia-container1",
]


def test_packages_pinned(host):
    assert host.package("docker-ce").version == "5:24.0.6-1~ubuntu.18.04~bionic"
    assert host.package("docker-ce-cli").version == "5:24.0.6-1~ubuntu.18.04~bionic"
    for name in TOOLKIT:
        assert host.package(name).version == "1.17.7-1"
    held = host.check_output("apt-mark showhold").split()
    assert sorted(held) == sorted(["docker-ce", "docker-ce-cli", *TOOLKIT])


def test_no_helper_was_needed(host):
    assert not host.package("python3-debian").is_installed


@pytest.mark.parametrize(
    ("name", "uri", "suite"),
    [
        ("docker", "file:/srv/localrepo/download.docker.com/linux/ubuntu", "bionic"),
        (
            "nvidia-container-toolkit",
            "file:/srv/localrepo/nvidia.github.io/libnvidia-container/stable/deb/$(ARCH)",
            "/",
        ),
    ],
)
def test_deb822_sources(host, name, uri, suite):
    lines = host.file(f"/etc/apt/sources.list.d/{name}.sources").content_string.splitlines()
    assert f"URIs: {uri}" in lines
    assert f"Suites: {suite}" in lines
    assert "Trusted: yes" in lines


def test_daemon_json_merged(host):
    # As the role left it, before the side effect's rollback.
    kept = "/var/lib/gpufix-fixture/daemon.json.before-rollback"
    daemon = json.loads(host.file(kept).content_string)
    assert daemon["runtimes"]["nvidia"]["path"] == "nvidia-container-runtime"
    # What the host had before stays.
    assert daemon["log-driver"] == "json-file"
    assert daemon["log-opts"] == {"max-size": "10m"}
    assert "default-runtime" not in daemon
    # Not Docker's 64 MiB for other containers (48g: the side effect's last size).
    assert daemon["default-shm-size"] == "48g"


def test_rollback_restored_daemon_json(host):
    daemon = json.loads(host.file("/etc/docker/daemon.json").content_string)
    assert daemon == {"log-driver": "json-file", "log-opts": {"max-size": "10m"}}


def test_dockerd_reloaded_restarted_only_with_consent_and_read_back(host):
    starts = host.file("/var/lib/gpufix-fixture/dockerd-starts").content_string.splitlines()
    assert starts == [
        "start default-shm-size=64M",  # the package started it with the host's old daemon.json
        "reload default-shm-size=16g",  # converge: SIGHUP, no container stopped
        "start default-shm-size=32g",  # side effect: no reload, consent, nothing running
        # (a --default-shm-size flag in a drop-in: refused before daemon.json changed, no reload)
        "start default-shm-size=64M",  # test setup: dockerd --config-file=/etc/docker/other.json
        "reload default-shm-size=64M",  # it re-read other.json: read back, reported, kept pending
        "start default-shm-size=48g",  # test setup: the operator removed the flag and restarted
        "reload default-shm-size=48g",  # the pending change: reloaded and read back
        "reload default-shm-size=64M",  # rollback: the host's own daemon.json, by SIGHUP
    ]
    assert not host.file("/var/lib/gpufix/docker-daemon-json-pending").exists


def test_the_running_dockerd_took_the_rolled_back_file(host):
    info = json.loads(host.check_output("docker info --format '{{json .}}'"))
    assert info["DefaultRuntime"] == "runc"
    # A reload replaces the runtimes (moby daemon/reload_unix.go): nvidia is gone with the file.
    assert "nvidia" not in info["Runtimes"]


def test_no_snap_stand_in_left(host):
    assert not host.file("/snap").exists


def test_wrapper_runs_the_pinned_image_with_nccl_settings(host):
    wrapper = host.file("/usr/local/bin/gpufix-run")
    assert wrapper.mode == 0o755
    before = len(host.file(CALLS).listdir()) if host.file(CALLS).exists else 0
    host.check_output("cd /tmp && gpufix-run -- python -c 'print(1)' 'a b'")
    argv = host.file(f"{CALLS}/call-{before + 1}").content_string.splitlines()
    assert argv[:4] == ["run", "--rm", "--gpus", "all"]
    assert "--ipc=host" in argv
    assert not [a for a in argv if a.startswith("--shm-size")]
    assert argv[argv.index("--network") + 1] == "host"
    assert "memlock=-1" in argv and "stack=67108864" in argv
    # The digest-pinned image, then the user's command exactly as given.
    assert argv[argv.index(IMAGE) :] == [IMAGE, "python", "-c", "print(1)", "a b"]


def test_wrapper_mounts_the_host_nccl_profile_when_there_is_one(host):
    # testinfra runs as root in the container (podman exec).
    host.check_output("printf 'NCCL_IB_DISABLE=1\\n' > /etc/nccl.conf")
    try:
        before = len(host.file(CALLS).listdir())
        host.check_output("cd /tmp && gpufix-run true")
        argv = host.file(f"{CALLS}/call-{before + 1}").content_string.splitlines()
    finally:
        host.check_output("rm -f /etc/nccl.conf")
    assert "/etc/nccl.conf:/etc/nccl.conf:ro" in argv


def test_wrapper_without_a_command_is_a_usage_error(host):
    res = host.run("gpufix-run")
    assert res.rc == 64
    assert "usage: gpufix-run" in res.stderr


def test_tools_answer(host):
    assert "24.0.6" in host.check_output("docker --version")
    assert "1.17.7" in host.check_output("nvidia-ctk --version")
