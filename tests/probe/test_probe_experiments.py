"""Experiments and soak end to end: real worker processes, real torch on CPU with gloo.

The test-only fault switch stands in for the hardware: `unless=NCCL_SHM_DISABLE=1` makes a
stall that only the shm-off experiment clears (as a broken shared-memory transport would),
`gpus=2` one that hits every run including GPU 2 (ranks stand in for GPUs on --cpu), and
`at-bytes=N` one that hits the soak at one message size. Each case spawns fresh processes that
import torch (2 s idle, over 10 s on a loaded 2-core machine), hence few cases and an import
deadline of its own.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import types
from pathlib import Path
from typing import Any

import pytest
from conftest import as_recorded_host, probe_env
from gpufix.engine import signals
from gpufix.probe import run_local, summarize
from workers import leftovers

pytest.importorskip("torch", reason="needs torch (CPU build is enough)")
pytestmark = pytest.mark.slow

PHASE = 6.0  # healthy phases finish in well under a second, even on a loaded machine
BASE = ["--cpu", "--no-single-gpu", "--phase-deadline", str(PHASE), "--import-deadline", "60"]


def probe(tmp_path: Path, args: list[str], fault: str) -> tuple[dict[str, Any], float]:
    t0 = time.monotonic()
    v = run_local(args=[*BASE, *args], env=probe_env(tmp_path, fault))
    elapsed = time.monotonic() - t0
    assert leftovers(str(tmp_path)) == [], "worker processes left behind"
    return v, elapsed


def test_experiments_stop_at_the_knob_that_clears_the_fault(tmp_path: Path) -> None:
    """A gloo run plans no NCCL knob (it reads none): a hand list runs them here, so that the
    machinery a GPU host uses is tested on CPU, and no NCCL cause is read from them."""
    knobs = "p2p-off,shm-off,cumem-off"
    args = ["--world-size", "2", "--deadline", "90", "--experiment-budget", "200"]
    v, _ = probe(
        tmp_path, [*args, "--experiments", knobs], "stall:pg_init:*;unless=NCCL_SHM_DISABLE=1"
    )

    assert v["verdict"] == "hung" and v["stalled"]["phase"] == "pg_init"
    # In the list's order: p2p-off first (it does not help), shm-off second (it does); then stop.
    assert [(e["id"], e["verdict"]) for e in v["experiments"]] == [
        ("p2p-off", "hung"),
        ("shm-off", "healthy"),
    ]
    first, second = v["experiments"]
    assert first["env"] == {"NCCL_P2P_DISABLE": "1"} and first["gpus"] is None
    assert first["stalled"] == {"phase": "pg_init", "ranks": [0, 1]}
    assert "made no progress in pg_init" in first["error"]
    assert second["env"] == {"NCCL_SHM_DISABLE": "1"} and second["error"] is None
    assert v["decided_by"] == "shm-off"
    assert v["no_p2p_rerun"]["verdict"] == "hung"  # the legacy field: the p2p-off result
    assert v["causes"] == []  # shm-transport on NCCL; gloo read no NCCL_SHM_DISABLE
    assert any(n.startswith("gloo run: NCCL reads none of its settings") for n in v["notes"])
    assert "healthy with shm-off (2 experiments)" in summarize(v)


def test_gpu_pairs_find_the_gpu_whose_inclusion_hangs(tmp_path: Path) -> None:
    pairs = "gpus-0-1,gpus-0-2,gpus-1-2"
    v, _ = probe(
        tmp_path,
        ["--world-size", "3", "--deadline", "90", "--experiments", pairs],
        "stall:pg_init:*;gpus=2",
    )

    assert v["verdict"] == "hung"
    assert [(e["id"], e["gpus"], e["verdict"]) for e in v["experiments"]] == [
        ("gpus-0-1", [0, 1], "healthy"),
        ("gpus-0-2", [0, 2], "hung"),
        ("gpus-1-2", [1, 2], "hung"),
    ]
    assert all(e["env"] == {} for e in v["experiments"])
    assert v["decided_by"] is None  # a healthy pair does not make the whole run healthy
    assert v["suspects"] == {"gpus": [2], "links": []}
    # CPU ranks stood in for the GPUs: the pairs name rank 2, no GPU's PCIe path (on GPUs the
    # same suspects give gpu-path, test_probe_plan.py)
    assert v["causes"] == []
    assert "PCIe" not in summarize(v)


def test_the_budget_bounds_the_experiments(tmp_path: Path) -> None:
    budget = 12.0
    knobs = "p2p-off,shm-off,cumem-off,p2p-level-pxb,proto-simple,algo-ring,nvls-off"
    args = ["--world-size", "2", "--deadline", "90", "--experiment-budget", str(budget)]
    # a gloo run plans none of these: a hand list runs them; no knob clears the stall
    v, _ = probe(tmp_path, [*args, "--experiments", knobs], "stall:pg_init:*")

    ran = [e for e in v["experiments"] if e["verdict"] != "skipped"]
    rest = [e for e in v["experiments"] if e["verdict"] == "skipped"]
    assert ran and rest, v["experiments"]
    # Every planned experiment is recorded; those past the budget say so.
    assert [e["id"] for e in v["experiments"]][:2] == ["p2p-off", "shm-off"]
    assert all(e["error"] == f"experiment budget of {budget:.0f} s spent" for e in rest)
    # past the budget only by the kill of the last one: its stalled rank ignores SIGTERM (0.5 s
    # grace), then SIGKILL and the reaping, on a loaded 2-core machine
    assert sum(e["elapsed_s"] for e in ran) <= budget + 4.0
    assert v["decided_by"] is None
    assert v["causes"] == []  # nccl-transport on NCCL; gloo has no NCCL transport to blame


def test_soak_names_the_message_size_that_hangs(tmp_path: Path) -> None:
    sweep = ["--soak", "--soak-min-bytes", "1K", "--soak-max-bytes", "1M", "--soak-iters", "3"]
    v, _ = probe(
        tmp_path,
        ["--world-size", "2", "--deadline", "60", "--no-experiments", *sweep],
        "stall:soak:1;at-bytes=65536",
    )

    assert v["verdict"] == "hung"
    assert v["stalled"]["phase"] == "soak" and v["stalled"]["ranks"] == [1]
    assert v["soak"] == {
        "sizes": [1024, 4096, 16384, 65536, 262144, 1048576],
        "iters": 3,
        "verdict": "hung",
        "stalled_at_bytes": 65536,
    }
    assert "soak hung at 65536 bytes" in summarize(v)


def test_soak_passes_and_reports_every_size(tmp_path: Path) -> None:
    sweep = ["--soak", "--soak-min-bytes", "4K", "--soak-max-bytes", "256K", "--soak-iters", "5"]
    v, _ = probe(tmp_path, ["--world-size", "2", "--deadline", "60", *sweep], "")

    assert v["verdict"] == "healthy", v
    soak = v["soak"]
    assert soak["verdict"] == "healthy" and soak["stalled_at_bytes"] is None
    assert [r["bytes"] for r in soak["results"]] == soak["sizes"] == [4096, 16384, 65536, 262144]
    for r in soak["results"]:  # nccl-tests: busbw = algbw * 2(n-1)/n, n = 2
        assert r["busbw_gbps"] == pytest.approx(r["algbw_gbps"], rel=0.01)
    assert "soak" in {p["phase"] for p in v["phases"]}


def test_a_main_run_with_one_experiment_says_so_and_is_no_plan_input(tmp_path: Path) -> None:
    """`--experiment ID` on one host: the verdict's main run is not the host's default, so a
    healthy result there must not read as "nothing to do" (review of issue 12, defect 3)."""
    import json

    from gpufix.errors import InvalidInput
    from gpufix.inputs import load_probe_verdict

    v, _ = probe(
        tmp_path,
        ["--world-size", "2", "--deadline", "60", "--experiment", "p2p-off"],
        "stall:pg_init:*;unless=NCCL_P2P_DISABLE=1",
    )
    assert v["verdict"] == "healthy" and v["experiments"] == []
    assert v["experiment_budget_s"] == 0.0  # no experiment runs after it
    assert v["node"]["experiment"] == "p2p-off" and v["node"]["nnodes"] == 1
    assert any("NCCL_P2P_DISABLE=1 (--experiment p2p-off)" in n for n in v["notes"])
    path = tmp_path / "verdict.json"
    path.write_text(json.dumps(v))
    with pytest.raises(InvalidInput, match="not the host's default"):
        load_probe_verdict(path)


def test_a_probe_of_one_host_under_ifname_says_so_and_is_no_plan_input(tmp_path: Path) -> None:
    """`--ifname X` on one host: every run used that interface, so a healthy verdict says
    nothing about the host's default choice, and plan refuses it as it does `--experiment`."""
    import json

    from gpufix.errors import InvalidInput
    from gpufix.inputs import load_probe_verdict

    v, _ = probe(tmp_path, ["--world-size", "2", "--deadline", "60", "--ifname", "lo"], "")
    assert v["verdict"] == "healthy"
    assert v["node"]["ifname"] == "lo" and v["node"]["nnodes"] == 1
    assert v["node"]["experiment"] is None
    assert any("NCCL_SOCKET_IFNAME=lo GLOO_SOCKET_IFNAME=lo (--ifname)" in n for n in v["notes"])
    path = tmp_path / "verdict.json"
    path.write_text(json.dumps(v))
    with pytest.raises(InvalidInput, match=r"used the interface lo \(--ifname\)"):
        load_probe_verdict(path)


def test_a_soak_size_that_outlasts_the_phase_deadline_while_progressing_is_healthy(
    tmp_path: Path,
) -> None:
    """Many iterations at one size take longer than a phase deadline; finished collectives
    restart the supervisor's clock, so only a size that stops progressing is a hang (review of
    issue 12, defect 4: 100000 iterations read as "hung in soak")."""
    sweep = ["--soak", "--soak-min-bytes", "1M", "--soak-max-bytes", "1M", "--soak-iters", "4000"]
    v, _ = probe(
        tmp_path,
        [
            "--world-size",
            "2",
            "--deadline",
            "120",
            "--no-experiments",
            "--phase-deadline",
            "2",
            *sweep,
        ],
        "",
    )
    # Not hung: on a loaded machine (CI's 2 cores with molecule beside it) a phase may pass its
    # slow threshold, which makes the run degraded (docs/probe.md), never hung.
    assert v["verdict"] in ("healthy", "degraded"), (v.get("stalled"), v.get("error"))
    assert v["stalled"] is None and v["failed_in"] is None
    assert v["soak"]["verdict"] == "healthy" and v["soak"]["iters"] == 4000


def _supervisors(token: str) -> list[int]:
    """Live probe programs (not workers) whose environment names token (their TMPDIR)."""
    import os

    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            environ = Path(f"/proc/{entry}/environ").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        mine = f"TMPDIR={token}".encode() in environ.split(b"\0")
        if b"gpufix_probe.py" in cmdline and b"--worker" not in cmdline and state != "Z" and mine:
            found.append(int(entry))
    return found


def test_sigterm_to_gpufix_probe_takes_the_probe_and_its_workers_down(tmp_path: Path) -> None:
    """A job runner's `kill PID` reaches gpufix only, not its process group (review of issue
    12, defect 5: the probe and its workers ran on until the probe's own deadline)."""
    import signal
    import subprocess
    import sys

    cli = Path(sys.executable).parent / "gpufix"
    cmd = [str(cli), "probe", "localhost", "--cpu", "--world-size", "2", "--phase-deadline",
           "60", "--deadline", "100", "--no-experiments"]  # fmt: skip
    proc = subprocess.Popen(
        cmd,
        env=probe_env(tmp_path, "stall:barrier:*"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    until = time.monotonic() + 90
    while len(leftovers(str(tmp_path))) < 2 and time.monotonic() < until:
        time.sleep(0.2)
    assert len(leftovers(str(tmp_path))) == 2, "the workers never started"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and "interrupted" in err
    assert leftovers(str(tmp_path)) == []
    assert _supervisors(str(tmp_path)) == []


def test_a_cpu_probe_plans_nothing_for_the_gpus(tmp_path: Path) -> None:
    """A real gloo verdict through the real CLI: the stall clears under NCCL_P2P_DISABLE=1 only
    because the fault switch says so (gloo reads no NCCL setting), so on a host with ACS on the
    plan changes nothing and asks for a probe on the GPUs (row gloo-stall)."""
    v, _ = probe(
        tmp_path,
        ["--world-size", "2", "--deadline", "90", "--experiments", "p2p-off"],
        "stall:allreduce:*;unless=NCCL_P2P_DISABLE=1",
    )
    assert v["backend"] == "gloo" and v["verdict"] == "hung" and v["decided_by"] == "p2p-off"
    assert v["causes"] == []  # no p2p-path from a run that read no NCCL_P2P_DISABLE
    hosts = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"
    v = as_recorded_host(v, hosts / "bionic-ga-2x3090.json")
    (tmp_path / "v.json").write_text(json.dumps(v))
    r = subprocess.run(
        [sys.executable, "-m", "gpufix", "plan", "x", "--facts",
         str(hosts / "bionic-ga-2x3090.json"), "--probe-verdict", str(tmp_path / "v.json"),
         "--json"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    plan = json.loads(r.stdout)["plans"][0]
    assert plan["strategy"] == "none" and plan["extra"]["decision"]["row"] == "gloo-stall"
    assert [n["id"] for n in plan["extra"]["needs"]] == ["gpu-probe"]


def test_a_gloo_stall_no_experiment_clears_runs_no_nccl_experiment(tmp_path: Path) -> None:
    """The reviewer's run: gloo on CPU, rank 1 stalls in the all-reduce and nothing clears it.
    NCCL reads none of its settings in a gloo run, so no NCCL knob is planned and no NCCL
    mechanism is blamed (it spent the budget on p2p-off, shm-off, cumem-off and blamed
    nccl-transport)."""
    v, _ = probe(
        tmp_path,
        ["--world-size", "2", "--deadline", "90", "--experiment-budget", "20"],
        "stall:allreduce:1",
    )
    assert v["backend"] == "gloo" and v["verdict"] == "hung"
    assert v["stalled"]["phase"] == "allreduce" and v["stalled"]["ranks"] == [1]
    assert v["experiments"] == [] and v["decided_by"] is None and v["no_p2p_rerun"] is None
    assert v["causes"] == []
    assert any(n.startswith("gloo run: no NCCL experiment was planned") for n in v["notes"])
    line = summarize(v)
    assert "experiment" not in line and "NCCL" not in line and "likely" not in line, line


def test_a_gloo_stall_still_runs_the_experiments_that_apply(tmp_path: Path) -> None:
    """The job's settings apply to any backend: job-env-off still runs in a gloo run (and
    hangs, as nothing clears this stall), and no NCCL knob runs after it."""
    args = ["--world-size", "2", "--deadline", "90", "--experiment-budget", "60"]
    v, _ = probe(tmp_path, [*args, "--job-env", "GLOO_TEST_JOB=1"], "stall:allreduce:1")
    assert v["backend"] == "gloo" and v["verdict"] == "hung"
    assert [(e["id"], e["verdict"]) for e in v["experiments"]] == [("job-env-off", "hung")]
    assert v["decided_by"] is None and v["job_env_culprit"] is None
    assert v["causes"] == []


def test_the_program_and_the_engine_agree_on_what_is_nccl_only(prog: types.ModuleType) -> None:
    """The program leaves NCCL_ONLY out of a gloo run's plan and reads no NCCL_CAUSES from it;
    the engine discards the same from older gloo verdicts (signals.as_evidence)."""
    assert set(prog.NCCL_ONLY) == signals.NCCL_ONLY
    assert set(prog.NCCL_CAUSES) == signals.NCCL_CAUSES
    assert all(prog.experiment_env(x)[0] and prog.experiment_env(x)[1] is None
               for x in prog.NCCL_ONLY)  # fmt: skip
    assert all(all(k.startswith("NCCL_") for k in prog.experiment_env(x)[0])
               for x in prog.NCCL_ONLY)  # fmt: skip
    ns = argparse.Namespace(no_experiments=False, experiment=None, experiments=None,
                            no_p2p_rerun=False, nnodes=1, job_env={"GLOO_A": "1"})  # fmt: skip
    nccl = prog.plan_experiments(ns, {}, 3, 0)
    assert set(prog.NCCL_ONLY) & set(nccl)  # the same plan on NCCL has knobs
    gloo = prog.plan_experiments(ns, {}, 3, 0, None, "gloo")
    assert gloo == ["job-env-off", "gpus-0-1", "gpus-0-2", "gpus-1-2"]
    main = {"verdict": "hung", "stalled": {"phase": "allreduce", "ranks": [1]}}
    for decided in (None, "p2p-off", "shm-off"):
        ev = {"main": main, "decided": decided, "backend": "gloo"}
        assert prog.find_causes(ev) == []
        assert prog.find_causes({**ev, "backend": "nccl"}) != []
    # on --cpu one CPU rank stood in for the GPU: no "train on one GPU" either
    single = {"verdict": "healthy", "device": "cpu"}
    assert prog.find_causes({"main": main, "single": single, "backend": "gloo"}) == []


def test_a_listed_pair_past_the_gpus_is_skipped_not_a_crash(tmp_path: Path) -> None:
    """--experiments gpus-0-5 on a two-GPU run indexed past CUDA_VISIBLE_DEVICES in the
    supervisor: a traceback and no verdict (probe review, 2026-12-06). It is recorded as
    skipped, and the other experiments run."""
    v, _ = probe(
        tmp_path,
        ["--world-size", "2", "--deadline", "60", "--experiments", "gpus-0-5,gpus-0-1"],
        "stall:pg_init:*",
    )
    assert v["verdict"] == "hung"
    by_id = {e["id"]: e for e in v["experiments"]}
    assert by_id["gpus-0-5"]["verdict"] == "skipped"
    assert "past the 2 this run has" in by_id["gpus-0-5"]["error"]
    assert by_id["gpus-0-1"]["verdict"] == "hung"
