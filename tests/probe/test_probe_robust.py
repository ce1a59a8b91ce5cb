"""The probe never hangs and never loses its verdict: wedged commands, signals, a dead supervisor.

Most cases stall the workers at the entry of import_torch (the fault switch fires before torch
is imported), so they cost a Python start, not an import of torch.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
import types
from pathlib import Path
from typing import Any

import pytest
from conftest import probe_env
from gpufix.probe import load_program, program_path, run_local, validate
from workers import leftovers

FAST = ["--cpu", "--world-size", "2", "--no-single-gpu", "--no-experiments"]
# Stopping the workers (SIGTERM, SIGKILL 0.5 s later) and writing the verdict, on a loaded
# machine: the grace docs/probe.md allows past --deadline.
GRACE_S = 5.0
# The supervisor starts workers only where torch is installed (the CPU build is enough).
needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")


def torch_version() -> str:
    out = subprocess.run(
        [sys.executable, "-c", "import torch; print(torch.__version__)"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return out.strip()


def fake_bin(tmp_path: Path, **scripts: str) -> dict[str, str]:
    """An environment whose PATH finds these shell scripts first (name: body)."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    for name, body in scripts.items():
        path = bindir / name
        path.write_text("#!/bin/sh\n" + body + "\n")
        path.chmod(0o755)
    env = probe_env(tmp_path)
    env["PATH"] = f"{bindir}:{env['PATH']}"
    return env


def start(tmp_path: Path, args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    cmd = [sys.executable, str(program_path()), *args, "--json-out", str(tmp_path / "v.json")]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def stop(proc: subprocess.Popen[str], sig: int) -> tuple[str, str]:
    """Send sig and read what the probe prints; killed whatever happens."""
    try:
        proc.send_signal(sig)
        return proc.communicate(timeout=30)
    finally:
        proc.kill()
        proc.wait()


def events(tmp_path: Path, rank: int) -> list[dict[str, Any]]:
    out = []
    for path in tmp_path.glob(f"gpufix-probe-*/main/rank{rank}.jsonl"):
        out += [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]
    return out


def reached(tmp_path: Path, rank: int, event: str, phase: str) -> bool:
    return any(e["e"] == event and e["p"] == phase for e in events(tmp_path, rank))


def wait_for(check: Any, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if check():
            return True
        time.sleep(0.1)
    return bool(check())


def kill_pids(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def pid_in(path: Path) -> list[int]:
    return [int(path.read_text())] if path.exists() and path.read_text().strip() else []


# --------------------------------------------------------------------------- run_cmd


def test_run_cmd_gives_up_on_a_child_that_outlives_sigkill(
    prog: types.ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """nvidia-smi wedged in the driver (D state) ignores SIGKILL: a kill that does nothing
    stands in for it. The old code waited for the child forever."""
    pidfile = tmp_path / "pid"
    monkeypatch.setattr(prog.os, "killpg", lambda pid, sig: None)
    cmd = ["sh", "-c", f"echo $$ > {pidfile}; exec sleep 15"]
    t0 = time.monotonic()
    try:
        assert prog.run_cmd(cmd, 0.5) is None
        elapsed = time.monotonic() - t0
    finally:
        monkeypatch.undo()
        kill_pids(pid_in(pidfile))
    assert elapsed < 0.5 + prog.CMD_REAP_S + 2.0


def test_run_cmd_never_reads_a_pipe_a_grandchild_holds(
    prog: types.ModuleType, tmp_path: Path
) -> None:
    """A grandchild in its own session keeps stdout open after the group is killed."""
    pidfile = tmp_path / "pid"
    inner = f"echo \\$\\$ > {pidfile}; exec sleep 15"
    cmd = ["sh", "-c", f'setsid sh -c "{inner}" & exec sleep 15']
    t0 = time.monotonic()
    try:
        assert prog.run_cmd(cmd, 0.5) is None
        elapsed = time.monotonic() - t0
    finally:
        wait_for(lambda: pid_in(pidfile), 2)
        kill_pids(pid_in(pidfile))
    assert elapsed < 0.5 + prog.CMD_REAP_S + 2.0


def test_run_cmd_ends_by_the_deadline_it_is_given(prog: types.ModuleType) -> None:
    t0 = time.monotonic()
    assert prog.run_cmd(["sleep", "10"], 10, until=t0 + 0.5) is None
    assert time.monotonic() - t0 < 3.0
    assert prog.run_cmd(["echo", "hi"], 10, until=time.monotonic() - 1) is None  # not run
    assert prog.run_cmd(["echo", "hi"], 10, until=time.monotonic() + 10) == "hi\n"


# --------------------------------------------------------------------------- the kernel log


@pytest.mark.parametrize(
    ("dmesg", "journalctl"),
    [
        ("echo 'dmesg: read kernel buffer failed: Operation not permitted' >&2; exit 1", "exit 0"),
        ("exit 0", "echo '-- No entries --'"),
        ("exit 1", "exit 1"),
    ],
    ids=["dmesg-refused-journal-empty", "both-empty", "both-fail"],
)
def test_an_empty_or_unreadable_kernel_log_is_unknown_not_zero(
    prog: types.ModuleType,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    dmesg: str,
    journalctl: str,
) -> None:
    env = fake_bin(tmp_path, dmesg=dmesg, journalctl=journalctl)
    monkeypatch.setenv("PATH", env["PATH"])
    assert prog.kernel_log_counts(5) is None


def test_a_readable_kernel_log_is_counted(
    prog: types.ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = fake_bin(tmp_path, dmesg="exit 1", journalctl="echo 'NVRM: Xid (PCI:0000:3b:00): 79'")
    monkeypatch.setenv("PATH", env["PATH"])
    assert prog.kernel_log_counts(5) == {"xid": 1, "nvrm": 0, "aer": 0, "source": "journalctl"}


# --------------------------------------------------------------------------- the deadline


def test_a_wedged_nvidia_smi_does_not_outlast_the_deadline(tmp_path: Path) -> None:
    """Without --cpu the probe asks nvidia-smi (and the kernel log) before any worker; each
    used to have 10 s of its own whatever --deadline said."""
    env = fake_bin(tmp_path, **{"nvidia-smi": "exec sleep 60", "dmesg": "exec sleep 60"})
    t0 = time.monotonic()
    proc = start(tmp_path, ["--deadline", "2", "--no-experiments"], env)
    out, err = proc.communicate(timeout=60)
    elapsed = time.monotonic() - t0
    v = validate(json.loads(out))
    assert elapsed <= 2 + GRACE_S, (elapsed, err)
    assert v["facts"]["kernel_log"] is None
    if not os.path.isdir("/proc/driver/nvidia/gpus"):  # no GPU: nvidia-smi was the only hope
        assert v["verdict"] == "not-applicable" and proc.returncode == 0


# --------------------------------------------------------------------------- signals


@needs_torch
@pytest.mark.slow
def test_sigterm_prints_the_verdict_so_far_naming_the_stalled_phase(tmp_path: Path) -> None:
    """What Ansible's timeout or an operator's kill used to lose: which phase and rank."""
    args = [*FAST, "--phase-deadline", "60", "--import-deadline", "90", "--deadline", "120"]
    proc = start(tmp_path, args, probe_env(tmp_path, "stall:pg_init:1"))
    there = wait_for(
        lambda: (
            reached(tmp_path, 0, "call", "pg_init") and reached(tmp_path, 1, "enter", "pg_init")
        ),
        90,
    )
    t0 = time.monotonic()
    out, err = stop(proc, signal.SIGTERM)
    stop_s = time.monotonic() - t0
    assert there, "the ranks never reached pg_init"
    assert proc.returncode == 128 + signal.SIGTERM, err
    v = validate(json.loads(out))
    assert v["verdict"] == "hung"
    assert v["stalled"] == {
        "phase": "pg_init",
        "ranks": [1],
        "waiting": [0],
        "called": [0],
        "by": "SIGTERM",
    }
    assert v["error"] == (
        "interrupted by SIGTERM during the main run: ranks [1] had not finished pg_init; "
        "ranks [0] were waiting for them"
    )
    assert v["causes"] == []  # an interrupted run is evidence of nothing
    # What the ranks read before the stall is kept (found on an H100: the NCCL version was lost).
    assert v["facts"]["torch"] == torch_version()
    assert {(p["phase"], p["rank"], p["ok"]) for p in v["phases"]} >= {
        ("p2p_copy", 0, True),
        ("pg_init", 0, False),
        ("pg_init", 1, False),
    }
    assert json.loads((tmp_path / "v.json").read_text()) == v
    assert stop_s < GRACE_S
    assert leftovers(str(tmp_path)) == []


def start_stalled_in_import(tmp_path: Path) -> subprocess.Popen[str]:
    """A probe whose two ranks are both stalled in import_torch, once they have said so."""
    args = [*FAST, "--phase-deadline", "60", "--deadline", "120"]
    proc = start(tmp_path, args, probe_env(tmp_path, "stall:import_torch:*"))
    there = wait_for(lambda: len(leftovers(str(tmp_path))) == 2, 30) and wait_for(
        lambda: events(tmp_path, 0) and events(tmp_path, 1), 30
    )
    if not there:
        stop(proc, signal.SIGKILL)
        pytest.fail("the two ranks never reported import_torch")
    return proc


@needs_torch
def test_sigint_names_the_ranks_in_import_torch(tmp_path: Path) -> None:
    proc = start_stalled_in_import(tmp_path)
    out, err = stop(proc, signal.SIGINT)
    assert proc.returncode == 128 + signal.SIGINT, err
    v = validate(json.loads(out))
    assert v["verdict"] == "hung" and v["stalled"]["phase"] == "import_torch"
    assert v["stalled"]["ranks"] == [0, 1] and v["stalled"]["by"] == "SIGINT"
    assert leftovers(str(tmp_path)) == []


def test_sigterm_before_the_workers_start_is_a_failed_verdict(tmp_path: Path) -> None:
    marker = tmp_path / "in-nvidia-smi"
    env = fake_bin(tmp_path, **{"nvidia-smi": f"touch {marker}; exec sleep 60"})
    proc = start(tmp_path, ["--deadline", "100"], env)
    ran = wait_for(marker.exists, 30)
    out, err = stop(proc, signal.SIGTERM)
    assert ran, "nvidia-smi never ran"
    assert proc.returncode == 128 + signal.SIGTERM, err
    v = validate(json.loads(out))
    assert v["verdict"] == "failed" and v["phases"] == []
    assert v["error"] == "interrupted by SIGTERM before the workers started"


# The probe's main() in a fresh interpreter, with one of its functions wrapped to send the
# probe a signal the first time it is called: a signal at an exact point, without sleeps.
SIGNAL_AT = """
import importlib.util, os, signal, sys
spec = importlib.util.spec_from_file_location("gpufix_probe", sys.argv[1])
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
real, signum, sent = getattr(m, sys.argv[2]), getattr(signal, sys.argv[3]), []
def wrapped(*args, **kwargs):
    if not sent:
        sent.append(1)
        os.kill(os.getpid(), signum)
    return real(*args, **kwargs)
setattr(m, sys.argv[2], wrapped)
sys.exit(m.main(sys.argv[4:]))
"""


def signal_at(
    tmp_path: Path, function: str, sig: str, args: list[str], env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-c", SIGNAL_AT, str(program_path()), function, sig, *args]
    cmd += ["--json-out", str(tmp_path / "v.json")]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)


# Rank 0 fails at once, before importing torch: a complete verdict in a Python start.
CRASH = ["--cpu", "--world-size", "1", "--no-single-gpu", "--no-experiments", "--deadline", "60"]


@needs_torch
@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_a_signal_while_the_verdict_is_written_does_not_lose_it(tmp_path: Path, sig: str) -> None:
    """The old supervisor gave the default handlers back before writing: SIGTERM killed it
    with nothing on stdout, SIGINT gave a traceback."""
    env = probe_env(tmp_path, "crash:import_torch:0")
    proc = signal_at(tmp_path, "write_atomic", sig, CRASH, env)
    assert proc.returncode == 1, proc.stderr  # the verdict's own status
    assert "Traceback" not in proc.stderr
    v = validate(json.loads(proc.stdout))
    assert v["verdict"] == "failed" and v["failed_in"] == {
        "phase": "import_torch",
        "ranks": [0],
        "called": [],
    }
    assert json.loads((tmp_path / "v.json").read_text()) == v


@needs_torch
def test_a_signal_during_the_clean_up_leaves_a_complete_verdict_alone(tmp_path: Path) -> None:
    """It used to skip the clean-up (temp dir left, no NCCL log tail) and turn the complete
    verdict into an interrupted one, exit 143."""
    logs = tmp_path / "nccl"
    logs.mkdir()
    (logs / "h.log").write_text("h:1:1 [0] NCCL WARN test line\n")
    env = probe_env(tmp_path, "crash:import_torch:0")
    proc = signal_at(tmp_path, "nccl_tail", "SIGTERM", [*CRASH, "--nccl-log", str(logs)], env)
    assert proc.returncode == 1, proc.stderr
    v = validate(json.loads(proc.stdout))
    assert v["verdict"] == "failed" and v["failed_in"] == {
        "phase": "import_torch",
        "ranks": [0],
        "called": [],
    }
    assert v["nccl_log_tail"] == ["h:1:1 [0] NCCL WARN test line"]
    assert "SIGTERM came after the verdict was complete: it stands" in v["notes"]
    assert not any("interrupted" in n for n in v["notes"])
    assert list(tmp_path.glob("gpufix-probe-*")) == []  # the run's temp dir removed


@needs_torch
def test_a_signal_while_stopping_a_failed_run_keeps_its_failure(tmp_path: Path) -> None:
    """Rank 1 crashed; the signal came while the supervisor stopped rank 0 (up to 2.5 s with
    ranks in D state). It used to be reported as a hang in import_torch, the error lost."""
    args = ["--cpu", "--world-size", "2", "--no-single-gpu", "--no-experiments"]
    env = probe_env(tmp_path, "crash:import_torch:1")
    proc = signal_at(tmp_path, "kill_groups", "SIGTERM", [*args, "--deadline", "60"], env)
    assert proc.returncode == 128 + signal.SIGTERM, proc.stderr
    v = validate(json.loads(proc.stdout))
    assert v["verdict"] == "failed" and v["stalled"] is None
    assert v["failed_in"] == {"phase": "import_torch", "ranks": [1], "called": []}
    assert v["error"].startswith("rank 1 in import_torch: RuntimeError: GPUFIX_PROBE_FAULT")
    assert (
        "interrupted by SIGTERM after the main run had failed, while its workers were being "
        "stopped: nothing ran after it"
    ) in v["notes"]
    assert leftovers(str(tmp_path)) == []


@needs_torch
def test_a_signal_while_the_ranks_start_is_no_healthy_verdict(tmp_path: Path) -> None:
    """A review: a signal before the first rank was recorded left a run with no ranks, which
    read as finished: a main run "healthy" at exit 143, a baseline an IndexError traceback."""
    proc = signal_at(tmp_path, "RankState", "SIGTERM", CRASH, probe_env(tmp_path))
    assert proc.returncode == 128 + signal.SIGTERM, proc.stderr
    assert "Traceback" not in proc.stderr
    v = validate(json.loads(proc.stdout))
    assert v["verdict"] == "failed" and v["causes"] == []
    assert v["error"] == "interrupted by SIGTERM while the ranks of the main run were starting"


@needs_torch
def test_a_signal_after_a_run_ended_but_before_it_was_judged_keeps_its_result(
    tmp_path: Path,
) -> None:
    """A review: the run stopped being current when it returned, before the caller judged it;
    a signal then gave "failed between runs" with no causes, the crash unsaid."""
    env = probe_env(tmp_path, "crash:import_torch:0")
    proc = signal_at(tmp_path, "take_main", "SIGTERM", CRASH, env)
    assert proc.returncode == 128 + signal.SIGTERM, proc.stderr
    v = validate(json.loads(proc.stdout))
    assert v["verdict"] == "failed" and v["failed_in"] == {
        "phase": "import_torch",
        "ranks": [0],
        "called": [],
    }
    assert v["error"].startswith("rank 0 in import_torch: RuntimeError: GPUFIX_PROBE_FAULT")
    assert any(
        n.startswith("interrupted by SIGTERM after the main run had failed") for n in v["notes"]
    )


def test_a_signal_before_the_supervisor_starts_gives_a_verdict(tmp_path: Path) -> None:
    """Handlers used to come only after the verdict's skeleton: rc -15 and nothing printed."""
    proc = signal_at(tmp_path, "base_verdict", "SIGTERM", FAST, probe_env(tmp_path))
    assert proc.returncode == 128 + signal.SIGTERM, proc.stderr
    v = validate(json.loads(proc.stdout))
    assert v["verdict"] == "failed" and v["phases"] == []
    assert v["error"] == "interrupted by SIGTERM before the workers started"
    assert list(tmp_path.glob("gpufix-probe-*")) == []


# --------------------------------------------------------------------------- a dead supervisor


@needs_torch
def test_workers_die_with_a_sigkilled_supervisor(tmp_path: Path) -> None:
    proc = start_stalled_in_import(tmp_path)
    try:
        t0 = time.monotonic()
        proc.kill()
        proc.wait()
        gone = wait_for(lambda: leftovers(str(tmp_path)) == [], 5)
        gone_s = time.monotonic() - t0
    finally:
        kill_pids(leftovers(str(tmp_path)))
    assert gone, "workers outlived their supervisor"
    assert gone_s < 5


def test_a_worker_ends_itself_after_its_deadline(tmp_path: Path) -> None:
    """The backstop when nothing else stops it: SIGALRM's default action, from the kernel."""
    cmd = [sys.executable, str(program_path()), "--worker", "--cpu", "--run-dir", str(tmp_path)]
    cmd += ["--world-size", "1", "--exit-after", "1"]
    t0 = time.monotonic()
    rc = subprocess.run(cmd, env=probe_env(tmp_path, "stall:import_torch:0"), timeout=30).returncode
    assert rc == -signal.SIGALRM and time.monotonic() - t0 < 10


def test_a_worker_whose_supervisor_is_already_gone_exits(tmp_path: Path) -> None:
    """The supervisor died between spawning the worker and its prctl: the parent changed."""
    cmd = [sys.executable, str(program_path()), "--worker", "--cpu", "--run-dir", str(tmp_path)]
    cmd += ["--world-size", "1", "--parent-pid", str(os.getpid() + 1)]
    env = probe_env(tmp_path, "stall:import_torch:0")
    assert subprocess.run(cmd, env=env, timeout=30).returncode == 1
    assert not (tmp_path / "rank0.jsonl").exists()  # gone before it reported anything


def test_run_local_returns_the_verdict_of_a_probe_it_had_to_stop(tmp_path: Path) -> None:
    """gpufix's own limit on the probe (run_local's timeout) SIGTERMs it: the verdict the probe
    then prints, naming what stalled, is returned instead of "did not return within N s"."""
    args = [*FAST, "--phase-deadline", "60", "--import-deadline", "90", "--deadline", "120"]
    v = run_local(args=args, env=probe_env(tmp_path, "stall:pg_init:1"), timeout=20)
    assert v["verdict"] == "hung" and v["stalled"]["by"] == "SIGTERM", v.get("error")
    assert v["stalled"]["phase"] in ("import_torch", "pg_init")
    assert leftovers(str(tmp_path)) == [], "worker processes left behind"


def test_reading_a_rank_s_events_holds_signals_back(tmp_path: Path) -> None:
    """A review: a signal between moving the file offset and applying the lines lost them for
    good. Delivered inside read(), the handler runs only after every line is applied."""
    prog = load_program()
    events = tmp_path / "rank0.jsonl"
    events.write_text(
        '{"e": "enter", "p": "pg_init", "t": 1.0}\n{"e": "call", "p": "pg_init", "t": 2.0}\n'
    )
    st = prog.RankState(0, None, str(events), 0.0)
    seen: list[dict[str, Any]] = []

    def handler(signum: int, frame: Any) -> None:
        seen.append({"enter": dict(st.enter), "call": dict(st.call)})
        raise KeyboardInterrupt

    real_apply = st.apply

    def apply_then_signal(rec: dict[str, Any]) -> None:
        if not seen and rec.get("e") == "enter":
            os.kill(os.getpid(), signal.SIGTERM)  # arrives after the offset moved
        real_apply(rec)

    st.apply = apply_then_signal
    old = signal.signal(signal.SIGTERM, handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            st.read()
    finally:
        signal.signal(signal.SIGTERM, old)
    # handled once both lines were applied, not between the offset's move and the first line
    assert seen == [{"enter": {"pg_init": 1.0}, "call": {"pg_init": 2.0}}]
