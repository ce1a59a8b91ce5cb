"""The facts module itself: runs on Python 3.6, gathers on this machine, and through real Ansible."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from gpufix.facts import snapshot as F
from gpufix.facts.local import gather_local, load_module, module_path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
g = load_module()


def vermin(path: Path) -> subprocess.CompletedProcess[str]:
    cmd = [str(BIN / "vermin"), "-t=3.6-", "--no-tips", "--violations", str(path)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)


def test_module_runs_on_python_36() -> None:
    result = vermin(module_path())
    assert result.returncode == 0, result.stdout + result.stderr


def test_vermin_check_can_fail(tmp_path: Path) -> None:
    newer = tmp_path / "newer.py"
    newer.write_text("import sys\nif (n := len(sys.argv)) > 1:\n    print(f'{n=}')\n")
    assert vermin(newer).returncode != 0


def test_documented_options_match_argument_spec() -> None:
    doc = yaml.safe_load(g.DOCUMENTATION)
    assert set(doc["options"]) == {"python_envs", "timeout", "total_timeout"}
    assert doc["options"]["timeout"]["default"] == g.DEFAULT_TIMEOUT
    assert doc["options"]["total_timeout"]["default"] == g.DEFAULT_TOTAL_TIMEOUT


def test_command_timeout_is_enforced() -> None:
    ctx = g.Context(timeout=1)
    start = time.monotonic()
    with pytest.raises(g.Unknown, match="timeout after 1s"):
        ctx.run(["sleep", "5"])
    assert time.monotonic() - start < 4


def test_a_tool_that_outlives_sigkill_is_not_waited_for(tmp_path: Path) -> None:
    # A process in the kernel's D state (nvidia-smi on a wedged GPU) survives SIGKILL and keeps
    # the pipes open. Stand-in: a child in a session of its own, which the group kill misses.
    pidfile = tmp_path / "pid"
    tool = tmp_path / "wedged"
    tool.write_text(f"#!/bin/sh\nsetsid sh -c 'echo $$ > {pidfile}; exec sleep 30' &\nsleep 30\n")
    tool.chmod(0o755)
    ctx = g.Context(timeout=1)
    start = time.monotonic()
    try:
        with pytest.raises(g.Unknown, match="timeout after 1s, still running after SIGKILL"):
            ctx.run([str(tool)])
        assert time.monotonic() - start < 1 + g.KILL_GRACE + 2
        # Asked again, it is not waited for a second time.
        with pytest.raises(g.Unknown, match="still running after SIGKILL"):
            ctx.run([str(tool), "again"])
        assert time.monotonic() - start < 1 + g.KILL_GRACE + 2
    finally:
        if pidfile.exists():
            os.kill(int(pidfile.read_text()), signal.SIGKILL)


def test_missing_tool_and_failing_tool_are_unknown() -> None:
    ctx = g.Context()
    with pytest.raises(g.Unknown, match="gpufix-no-such-tool: not found"):
        ctx.run(["gpufix-no-such-tool"])
    with pytest.raises(g.Unknown, match="exit 3"):
        ctx.run(["sh", "-c", "echo boom >&2; exit 3"])


def test_read_reports_missing_file() -> None:
    with pytest.raises(g.Unknown, match="/nonexistent/x: not found"):
        g.Context().read("/nonexistent/x")


def test_gather_here_has_every_key_and_is_valid() -> None:
    snap = gather_local(timeout=5)
    assert set(snap.facts) == set(g.FACT_KEYS)
    assert F.schema_errors(snap.to_doc()) == []
    gpus = snap.facts["gpus"]
    # No NVIDIA GPU on this machine or in CI: either "none" or "could not tell, because ...".
    if shutil.which("nvidia-smi") is None:
        assert gpus == [] or (F.is_unknown(gpus) and gpus["unknown"])
    assert snap.facts["python"]["version"] == ".".join(map(str, sys.version_info[:3]))
    assert isinstance(F.get(snap, "shm.size_bytes"), int)


class _Files:
    """A Context stand-in that reads from a dict (only read_or_none is used)."""

    def __init__(self, files: dict[str, str]) -> None:
        self.files = files

    def read_or_none(self, path: str) -> str | None:
        return self.files.get(path)


@pytest.mark.parametrize(
    ("markers", "files", "where", "evidence"),
    [
        ((), {"/proc/1/cgroup": "0::/init.scope\n"}, "host", None),
        (("/.dockerenv",), {}, "container", "/.dockerenv"),
        (("/run/.containerenv",), {}, "container", "/run/.containerenv"),
        ((), {"/proc/1/cgroup": "12:pids:/kubepods/pod1/x\n"}, "container", "kubepods"),
        ((), {"/proc/1/environ": "PATH=/bin\x00container=lxc\x00"}, "container", "container="),
        # A pod under cgroup v2 whose runtime also left /.dockerenv: named as a pod.
        (
            ("/.dockerenv",),
            {"/proc/1/cgroup": "0::/\n", "/proc/1/environ": "KUBERNETES_SERVICE_HOST=10.0.0.1\x00"},
            "container",
            "KUBERNETES_SERVICE_HOST",
        ),
        (
            ("/.dockerenv",),
            {"/proc/1/cgroup": "12:pids:/kubepods/pod1/x\n"},
            "container",
            "kubepods",
        ),
        # Only the whole variable name counts.
        ((), {"/proc/1/environ": "MY_KUBERNETES_SERVICE_HOST=x\x00"}, "host", None),
    ],
)
def test_gathered_in_says_host_or_container(
    monkeypatch: pytest.MonkeyPatch,
    markers: tuple[str, ...],
    files: dict[str, str],
    where: str,
    evidence: str | None,
) -> None:
    monkeypatch.setattr(g.os.path, "exists", lambda path: path in markers)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    got = g.g_gathered_in(_Files(files), {})
    assert got["where"] == where
    assert (got["evidence"] is None) if evidence is None else (evidence in got["evidence"])
    # containers.in_container reads the same evidence.
    assert (g.container_evidence(_Files(files)) is not None) == (where == "container")


def test_a_pod_is_named_from_the_modules_own_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """kubectl exec (or Ansible's kubectl connection) runs the module with the container's
    environment; /proc/1/environ may be unreadable to it."""
    monkeypatch.setattr(g.os.path, "exists", lambda path: False)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    got = g.g_gathered_in(_Files({}), {})
    assert got == {"where": "container", "evidence": "environment: KUBERNETES_SERVICE_HOST"}
    # a plain host whose PID 1 (systemd) was read: a shell's variable does not make it a pod
    host = _Files({"/proc/1/environ": "PATH=/bin\x00", "/proc/1/cgroup": "0::/init.scope\n"})
    assert g.g_gathered_in(host, {}) == {"where": "host", "evidence": None}


def test_gather_survives_a_broken_gatherer(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(ctx: object, opts: object) -> None:
        raise KeyError("boom")

    gatherers = tuple((n, broken if n == "cpu" else f) for n, f in g.GATHERERS)
    monkeypatch.setattr(g, "GATHERERS", gatherers)
    facts = g.gather({"timeout": 5})
    assert facts["cpu"] == {"unknown": "error: KeyError: 'boom'"}
    assert set(facts) == set(g.FACT_KEYS)


def fake_dist(site: Path, dirname: str, version: str, meta: str = "METADATA") -> None:
    d = site / dirname
    d.mkdir(parents=True)
    (d / meta).write_text(f"Metadata-Version: 2.1\nName: x\nVersion: {version}\n\nbody\n")


def test_python_envs_read_metadata_without_importing(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    fake_dist(site, "torch-2.1.2+cu121.dist-info", "2.1.2+cu121")
    fake_dist(site, "nvidia_nccl_cu12-2.18.1.dist-info", "2.18.1")
    fake_dist(site, "accelerate-0.25.0-py3.10.egg-info", "0.25.0", meta="PKG-INFO")
    # A torch package that would fail on import proves nothing is imported.
    (site / "torch").mkdir()
    (site / "torch" / "__init__.py").write_text("raise SystemExit('imported!')\n")
    facts = g.gather({"python_envs": [str(py), "/nonexistent/bin/python"], "timeout": 10})
    env, missing = facts["python_envs"]
    assert env["version"] == ".".join(map(str, sys.version_info[:3]))
    assert env["packages"]["torch"] == "2.1.2+cu121"
    assert env["packages"]["nvidia-nccl-cu12"] == "2.18.1"
    assert env["packages"]["accelerate"] == "0.25.0"
    assert env["packages"]["transformers"] is None
    assert missing["packages"] == {"unknown": "/nonexistent/bin/python: not found"}


def ansible_json(*args: str) -> dict:
    env = dict(
        os.environ,
        PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        ANSIBLE_HOME=str(ROOT / ".ansible"),
    )
    cmd = [str(BIN / "ansible"), "localhost", "-o", "-m", "gpufix_facts", "-c", "local", *args]
    result = subprocess.run(
        cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180, check=False
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    # One line per host with -o: "localhost | SUCCESS => {...}".
    line = next(ln for ln in result.stdout.splitlines() if ln.startswith("localhost |"))
    return json.loads(line.split("=>", 1)[1])


@pytest.mark.slow
def test_module_through_real_ansible() -> None:
    python = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
    res = ansible_json(
        "-i", "localhost,", "-e", f"ansible_python_interpreter={python}", "-a", "timeout=5"
    )
    assert res["changed"] is False
    facts = res["ansible_facts"]["gpufix"]
    assert set(facts) == set(g.FACT_KEYS)
    gpus = facts["gpus"]
    if shutil.which("nvidia-smi") is None:
        assert gpus == [] or (F.is_unknown(gpus) and gpus["unknown"])
    assert facts["python"]["executable"] == python
    snap = F.from_module_result("localhost", res["ansible_facts"])
    assert F.schema_errors(snap.to_doc()) == []


OUTPUTS = ROOT / "tests" / "fixtures" / "tool_outputs"


def stub_nvidia_smi(tmp_path: Path, script: str) -> Path:
    """A stand-in nvidia-smi that prints recorded outputs (this machine has no GPU)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    stub = bindir / "nvidia-smi"
    stub.write_text("#!/bin/sh\nO=" + str(OUTPUTS) + "\n" + script)
    stub.chmod(0o755)
    return bindir


def test_gather_with_a_470_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bindir = stub_nvidia_smi(
        tmp_path,
        """case "$*" in
  *compute_cap*) cat $O/query_470_invalid_field.txt; exit 2;;
  *--query-gpu=index*) cat $O/query_470_fallback.csv;;
  *driver_version*) echo 470.182.03;;
  "topo -m") cat $O/topo_470_ansi_sys.txt;;
  "topo -p2p r") cat $O/p2p_r_2x3090.txt;;
  *compute-apps*) cat $O/compute_apps.csv;;
  *) exit 9;;
esac
""",
    )
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    facts = g.gather({"timeout": 5})
    assert [x["index"] for x in facts["gpus"]] == [0, 1]
    assert F.is_unknown(facts["gpus"][0]["compute_capability"])
    assert facts["topology"]["worst"] == "SYS"
    assert facts["p2p"]["read"]["GPU0"] == {"GPU1": "OK"}
    assert [p["pid"] for p in facts["gpu_processes"]] == [48213, 48214]
    assert facts["driver"]["userspace_sources"]["nvidia_smi"] == "470.182.03"
    assert facts["driver"]["nvml_error"] is None


def test_gather_with_nvml_mismatch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Newer nvidia-smi prints the NVML failure on stdout and exits 18.
    bindir = stub_nvidia_smi(tmp_path, "cat $O/nvml_mismatch.txt; exit 18\n")
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    facts = g.gather({"timeout": 5})
    for key in ("gpus", "topology", "p2p", "gpu_processes"):
        assert (
            F.is_unknown(facts[key]) and "Driver/library version mismatch" in facts[key]["unknown"]
        )
    assert facts["driver"]["mismatch"] is True
    assert facts["driver"]["nvml_error"].startswith("Failed to initialize NVML")
    assert F.schema_errors(F.from_module_result("h", facts).to_doc()) == []


def test_gather_with_a_hanging_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bindir = stub_nvidia_smi(tmp_path, "sleep 30\n")  # a child holds the pipes too
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    start = time.monotonic()
    facts = g.gather({"timeout": 1})
    # After one timeout the other nvidia-smi calls are not waited for again.
    assert time.monotonic() - start < 5
    assert facts["gpus"] == {"unknown": "nvidia-smi: timeout after 1s"}
    assert "timeout" in facts["driver"]["nvml_error"]


@pytest.mark.parametrize(
    ("dump", "reboot"),
    [
        (
            'APT::Periodic::Unattended-Upgrade "1";\nUnattended-Upgrade::Automatic-Reboot "true";\n',
            True,
        ),
        (
            'APT::Periodic::Unattended-Upgrade "1";\nUnattended-Upgrade::Automatic-Reboot "false";\n',
            False,
        ),
        ('APT::Periodic::Unattended-Upgrade "1";\n', False),
        # Upgrades off: nothing reboots, whatever the setting says.
        (
            'APT::Periodic::Unattended-Upgrade "0";\nUnattended-Upgrade::Automatic-Reboot "yes";\n',
            False,
        ),
    ],
)
def test_unattended_upgrades_automatic_reboot(dump: str, reboot: bool) -> None:
    ctx = g.Context()
    ctx._cache["dpkg"] = {"unattended-upgrades": "2.8ubuntu1"}
    ctx.run = lambda argv, **_: dump  # type: ignore[method-assign]
    assert g.g_unattended(ctx, {})["automatic_reboot"] is reboot


@pytest.mark.skipif(os.geteuid() != 0, reason="the module drops root only when it has it")
def test_an_interpreter_another_account_controls_runs_as_that_account() -> None:
    """An attack review (2026-12-07): a plan file names the interpreters apply's facts run with
    (as root, under become): `/tmp/python3`, any account's file, ran as root. Now it runs as its
    owner (or as nobody when root owns it but others may write there); root's own runs as root."""
    import tempfile

    top = Path(tempfile.mkdtemp(dir="/tmp"))
    try:
        top.chmod(0o755)
        # prints its uid where the version goes: who ran it
        script = "#!/bin/sh\necho '[\"'$(id -u)'.0.0\"]'\n"
        theirs, loose, mine = top / "theirs", top / "loose", top / "mine"
        for d in (theirs, loose, mine):
            d.mkdir()
            (d / "python3").write_text(script)
            (d / "python3").chmod(0o755)
        os.chown(theirs / "python3", 4242, 4242)
        loose.chmod(0o777)  # root's file, in a directory everyone may write
        # a review (2026-12-07): root's venv whose site-packages holds another account's .pth
        # (site runs its import lines), and a link chain with another account's link inside
        pth = top / "venv"
        (pth / "bin").mkdir(parents=True)
        (pth / "bin" / "python3").write_text(script)
        (pth / "bin" / "python3").chmod(0o755)
        site = pth / "lib" / "python3.6" / "site-packages"
        site.mkdir(parents=True)
        (site / "evil.pth").write_text("import os\n")
        os.chown(site / "evil.pth", 4343, 4343)
        hop = top / "hop"
        hop.mkdir()
        os.chown(hop, 4444, 4444)
        (hop / "python3").symlink_to(mine / "python3")
        (top / "first").mkdir()
        (top / "first" / "python3").symlink_to(hop / "python3")
        given = [theirs, loose, mine, pth / "bin", top / "first"]
        envs = g.gather({"python_envs": [str(d / "python3") for d in given]})
        got = [e["version"] for e in envs["python_envs"]]
        assert got == ["4242.0.0", "65534.0.0", "0.0.0", "4343.0.0", "4444.0.0"]
        # two accounts: neither may run the other's code, so nobody runs it
        os.chown(mine / "python3", 4545, 4545)
        assert g.interpreter_account(str(top / "first" / "python3")) == (65534, 65534)
    finally:
        shutil.rmtree(top)


class _Which:
    def __init__(self, tools: set[str]) -> None:
        self.tools = tools

    def which(self, name: str) -> str | None:
        return f"/usr/bin/{name}" if name in self.tools else None


@pytest.mark.parametrize(
    ("dirs", "tools", "node"),
    [((), set(), False), (("/var/lib/kubelet",), set(), True), ((), {"kubelet"}, True),
     ((), {"docker"}, False)],
)  # fmt: skip
def test_a_kubernetes_node_is_read_from_the_kubelet(
    monkeypatch: pytest.MonkeyPatch, dirs: tuple[str, ...], tools: set[str], node: bool
) -> None:
    """Facts module 1.6.0: a containerd node has no docker binary; its pods' /dev/shm is the
    runtime's 64 MiB or their spec's (docs/decision.md, kube-node-shm-fine)."""
    monkeypatch.setattr(g.os.path, "isdir", lambda path: path in dirs)
    assert g.kubelet_node(_Which(tools)) is node


def test_the_kubelet_is_not_read_inside_a_container() -> None:
    facts = g.gather({"timeout": 5})
    kubelet = facts["containers"].get("kubelet") if isinstance(facts["containers"], dict) else None
    if facts["gathered_in"]["where"] == "container":
        assert kubelet is None
    else:
        assert isinstance(kubelet, bool)
