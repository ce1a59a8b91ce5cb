"""Probe evidence -> causes, parsers, Prometheus text, verdict validation and one-line summaries.

Fast: no worker processes. The program is loaded from its file, as the host would run it.
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import re
import types
from pathlib import Path
from typing import Any

import pytest
from gpufix.errors import GpufixError
from gpufix.facts.local import load_module as load_facts_module
from gpufix.probe import load_verdict, program_path, summarize, validate
from gpufix.probe.local import schema

TOOL_OUTPUTS = Path(__file__).parent / "fixtures" / "tool_outputs"


@pytest.fixture(scope="module")
def prog() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("gpufix_probe_under_test", program_path())
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def verdict_of(prog: types.ModuleType, **fields: Any) -> dict[str, Any]:
    ns = argparse.Namespace(
        run_id="abc",
        deadline=60.0,
        phase_deadline=30.0,
        no_experiments=False,
        experiment_budget=180,
        experiment=None,
    )
    v: dict[str, Any] = prog.base_verdict(ns, "host01", 2, "nccl")
    v.update(fields)
    return v


def ids(causes: list[dict[str, str]]) -> list[tuple[str, str]]:
    return [(c["id"], c["strategy"]) for c in causes]


HUNG_PG = {"verdict": "hung", "stalled": {"phase": "pg_init", "ranks": [1]}, "failed_in": None}
OK = {"verdict": "healthy", "stalled": None, "failed_in": None}


@pytest.mark.parametrize(
    ("evidence", "expected"),
    [
        (
            {"main": HUNG_PG, "rerun": OK, "single": OK},
            [
                ("p2p-path", "pcie-acs"),
                ("p2p-path-workaround", "nccl-profile"),
                ("single-gpu-fallback", "single-gpu"),
            ],
        ),
        (
            {"main": HUNG_PG, "rerun": HUNG_PG, "single": OK},
            [("nccl-transport", "nccl-profile"), ("single-gpu-fallback", "single-gpu")],
        ),
        (
            {
                "main": {"verdict": "failed", "failed_in": {"phase": "cuda_init", "ranks": [0]}},
                "texts": ["RuntimeError: CUDA error: Driver/library version mismatch"],
            },
            [("driver-mismatch", "driver-pin")],
        ),
        (
            {
                "main": {"verdict": "failed", "failed_in": {"phase": "pg_init", "ranks": [0]}},
                "texts": ["NCCL WARN Error: failed to extend /dev/shm/nccl-x: No space left"],
            },
            [("shm", "container-fix")],
        ),
        (
            {
                "main": {"verdict": "failed", "failed_in": {"phase": "cuda_init", "ranks": [0]}},
                "texts": ["The NVIDIA driver on your system is too old (found version 11040)"],
            },
            [("driver-too-old", "cuda-downgrade")],
        ),
        (
            {"main": {"verdict": "hung", "stalled": {"phase": "cuda_init", "ranks": [3]}}},
            [("gpu-init", "driver-pin")],
        ),
        ({"main": OK, "low_copy": True}, [("p2p-slow-copy", "pcie-acs")]),
        (
            {"main": OK, "slow": [{"phase": "allreduce"}], "rerun": OK},
            [("p2p-path", "pcie-acs"), ("p2p-path-workaround", "nccl-profile")],
        ),
        ({"main": OK}, []),
    ],
)
def test_evidence_maps_to_causes(
    prog: types.ModuleType, evidence: dict[str, Any], expected: list[tuple[str, str]]
) -> None:
    assert ids(prog.find_causes(evidence)) == expected


def test_every_cause_uses_a_known_strategy(prog: types.ModuleType) -> None:
    cause = schema()["properties"]["causes"]["items"]["properties"]
    known = set(cause["strategy"]["enum"])
    assert {"pcie-acs", "nccl-profile", "none"} <= known
    assert {strategy for strategy, _ in prog.CAUSES.values()} <= known
    assert {cid for _, cid in prog.TEXT_SIGNS} <= set(prog.CAUSES)


TOPO_PCIE = """\
\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\tNUMA Affinity
GPU0\t X \tPIX\tSYS\tSYS\t0-15\t0
GPU1\tPIX\t X \tSYS\tSYS\t0-15\t0
GPU2\tSYS\tSYS\t X \tPXB\t16-31\t1
GPU3\tSYS\tSYS\tPXB\t X \t16-31\t1

Legend:
  X    = Self
"""
TOPO_NVLINK = """\
\tGPU0\tGPU1\tCPU Affinity
GPU0\t X \tNV12\t0-63
GPU1\tNV12\t X \t0-63
"""


def test_topology_worst_link(prog: types.ModuleType) -> None:
    assert prog.topo_worst(TOPO_PCIE) == "SYS"
    assert prog.topo_worst(TOPO_NVLINK) == "NV12"
    assert prog.topo_worst("") is None
    assert prog.link_class("NV12") == "nvlink"
    assert prog.link_class("SYS") == "sys"
    assert prog.link_class(None) == "pcie"


@pytest.mark.parametrize(
    "spec",
    [
        "stall",
        "hang:pg_init:0",
        "stall:nccl_init:0",
        "slow:barrier:x",
        "slow:barrier:0:y",
        "stall:pg_init:*;unless=NCCL_P2P_DISABLE",  # no value
        "stall:pg_init:*;gpus=1+x",
        "stall:soak:*;at-bytes=1K",
        "stall:pg_init:*;when=main",
        # Out of range: the docs say a typo exits 3 (review of issue 12, defect 9).
        "stall:barrier:1:-3",
        "stall:barrier:1:nan",
        "slow:barrier:1:inf",
        "stall:barrier:-1",
        "stall:soak:1;at-bytes=-1",
        "stall:pg_init:*;gpus=-1",
    ],
)
def test_bad_fault_spec_is_rejected(prog: types.ModuleType, spec: str) -> None:
    with pytest.raises(ValueError, match="GPUFIX_PROBE_FAULT"):
        prog.parse_fault(spec)


def test_fault_spec(prog: types.ModuleType) -> None:
    f = prog.parse_fault("slow:allreduce:*:2.5")
    assert (f["action"], f["phase"], f["rank"], f["seconds"]) == ("slow", "allreduce", None, 2.5)
    f = prog.parse_fault("crash:cuda_init:3")
    assert (f["action"], f["phase"], f["rank"], f["seconds"]) == ("crash", "cuda_init", 3, None)
    f = prog.parse_fault(
        "stall:pg_init:*;unless=NCCL_P2P_DISABLE=1;unless=NCCL_P2P_LEVEL=PXB;gpus=1+3"
    )
    assert f["unless"] == [("NCCL_P2P_DISABLE", "1"), ("NCCL_P2P_LEVEL", "PXB")]
    assert f["gpus"] == [1, 3] and f["at_bytes"] is None
    assert prog.parse_fault("stall:soak:0;at-bytes=65536")["at_bytes"] == 65536


def test_fault_clears_only_under_its_knob(
    prog: types.ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    f = prog.parse_fault("stall:pg_init:*;unless=NCCL_P2P_DISABLE=1")
    monkeypatch.delenv("NCCL_P2P_DISABLE", raising=False)
    assert prog.fault_fires(f, "pg_init", 1, [0, 1], None)
    assert not prog.fault_fires(f, "barrier", 1, [0, 1], None)
    monkeypatch.setenv("NCCL_P2P_DISABLE", "0")
    assert prog.fault_fires(f, "pg_init", 1, [0, 1], None)  # another value is not the knob
    monkeypatch.setenv("NCCL_P2P_DISABLE", "1")
    assert not prog.fault_fires(f, "pg_init", 1, [0, 1], None)


def test_fault_on_a_gpu_or_a_link_fires_only_when_the_run_includes_it(
    prog: types.ModuleType,
) -> None:
    gpu2 = prog.parse_fault("stall:pg_init:*;gpus=2")
    link = prog.parse_fault("stall:pg_init:*;gpus=0+2")
    assert prog.fault_fires(gpu2, "pg_init", 0, [1, 2], None)
    assert not prog.fault_fires(gpu2, "pg_init", 0, [0, 1], None)
    assert prog.fault_fires(link, "pg_init", 1, [0, 1, 2], None)
    assert not prog.fault_fires(link, "pg_init", 1, [1, 2], None)
    soak = prog.parse_fault("stall:soak:*;at-bytes=4096")
    assert not prog.fault_fires(soak, "soak", 0, [0, 1], None)  # at phase entry: not yet
    assert prog.fault_fires(soak, "soak", 0, [0, 1], 4096)


def test_phases_per_run_kind(prog: types.ModuleType) -> None:
    plain = [p for p in prog.PHASES if p not in ("rendezvous", "soak")]
    assert prog.phases_for("main", False) == plain
    assert "p2p_copy" not in prog.phases_for("exp", False)  # direct copies ignore NCCL env
    assert "p2p_copy" in prog.phases_for("pair", False)  # a pair's copy is the link under test
    assert prog.phases_for("single", False) == ["import_torch", "cuda_init", "alloc"]
    assert prog.phases_for("single", True) == ["import_torch", "alloc"]
    assert prog.phases_for("main", True, soak=True)[-2:] == ["soak", "destroy"]
    node = prog.phases_for("main", True, multinode=True)
    assert node == [
        "import_torch",
        "alloc",
        "rendezvous",
        "pg_init",
        "barrier",
        "allreduce",
        "destroy",
    ]


def test_prometheus_text(prog: types.ModuleType) -> None:
    v = verdict_of(
        prog,
        verdict="degraded",
        phases=[
            {"phase": "pg_init", "rank": 1, "start": 1.0, "end": 3.5, "ok": True},
            {"phase": "barrier", "rank": 1, "start": 3.5, "end": None, "ok": False},
        ],
        allreduce=[{"bytes": 1048576, "algbw_gbps": 2.0, "busbw_gbps": 2.0}],
        p2p={"matrix": {}, "copy_gbps": {"0-1": 0.4}},
    )
    text = prog.prometheus(v)
    assert 'gpufix_probe_verdict{verdict="degraded"} 1.0' in text
    assert 'gpufix_probe_verdict{verdict="healthy"} 0.0' in text
    assert 'gpufix_probe_phase_seconds{phase="pg_init",rank="1"} 2.5' in text
    assert 'phase="barrier"' not in text  # unfinished phases have no duration
    assert 'gpufix_probe_p2p_copy_gbps{pair="0-1"} 0.4' in text
    assert 'gpufix_probe_cause{cause="driver-mismatch"} 0.0' in text  # every known cause: 0
    assert "gpufix_kernel_log_lines" not in text  # kernel log unknown: no series, not 0
    for line in text.splitlines():
        assert re.fullmatch(r"# (HELP|TYPE) \w+ .+|\w+(\{[^}]*\})? [-0-9.e+]+", line), line


def test_prometheus_causes_and_kernel_log(prog: types.ModuleType) -> None:
    v = verdict_of(
        prog,
        verdict="failed",
        causes=prog.cause_records(["driver-mismatch", "gpu-init"]),
        facts={"kernel_log": {"xid": 2, "nvrm": 5, "aer": 0, "source": "dmesg"}},
    )
    text = prog.prometheus(v, now=1700000000.0)
    assert 'gpufix_probe_cause{cause="driver-mismatch"} 1.0' in text
    assert 'gpufix_probe_cause{cause="gpu-init"} 1.0' in text
    assert 'gpufix_probe_cause{cause="shm"} 0.0' in text
    assert text.count("gpufix_probe_cause{") == len(prog.CAUSES)
    assert 'gpufix_kernel_log_lines{kind="xid"} 2.0' in text
    assert 'gpufix_kernel_log_lines{kind="nvrm"} 5.0' in text
    assert 'gpufix_kernel_log_lines{kind="aer"} 0.0' in text
    assert text.count("gpufix_kernel_log_lines{") == 3  # the source is no kind
    assert "gpufix_probe_last_run_timestamp_seconds 1700000000.0" in text


def test_kernel_log_counts_agree_with_the_facts_module(prog: types.ModuleType) -> None:
    text = (TOOL_OUTPUTS / "dmesg_xid_aer.txt").read_text()  # a recorded bionic dmesg
    assert prog.parse_kernel_log(text) == {"xid": 1, "nvrm": 3, "aer": 2}
    assert prog.parse_kernel_log(text) == load_facts_module().parse_kernel_log(text)


def test_nvml_mismatch_is_the_first_cause(prog: types.ModuleType) -> None:
    smi = (TOOL_OUTPUTS / "nvml_mismatch.txt").read_text()  # nvidia-smi after an upgrade
    line = prog.nvml_error_line(smi)
    assert line == "Failed to initialize NVML: Driver/library version mismatch"
    assert prog.nvml_error_line("GPU 0: NVIDIA H200 (UUID: GPU-1)\n") is None
    failed_init = {"verdict": "failed", "stalled": None, "failed_in": {"phase": "cuda_init"}}
    causes = prog.find_causes({"texts": [line], "main": failed_init})
    assert [c["id"] for c in causes] == ["driver-mismatch"]  # not gpu-init: the words decide


def test_prom_from_writes_a_made_verdicts_textfile(
    prog: types.ModuleType, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    made = verdict_of(prog, verdict="failed", error="killed by the hard timeout")
    src, out = tmp_path / "probe.json", tmp_path / "gpufix_probe.prom"
    src.write_text(json.dumps(made))
    assert prog.main(["--prom-from", str(src), "--prom-out", str(out)]) == 0
    assert 'gpufix_probe_verdict{verdict="failed"} 1.0' in out.read_text()
    assert capsys.readouterr().out == ""  # no verdict printed: this mode only writes the file

    src.write_text('{"verdict": "rm -rf /"}')
    assert prog.main(["--prom-from", str(src), "--prom-out", str(out)]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a gpufix-probe verdict" in err
    assert prog.main(["--prom-from", str(src)]) == 3
    assert "needs --prom-out" in capsys.readouterr().err


def test_prom_from_refuses_what_is_not_a_regular_file(
    prog: types.ModuleType, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """A link to /dev/zero and a FIFO: refused at once, not read forever (the role runs this as
    root on GPU hosts; review of issue 12, defect 6)."""
    import os

    out = tmp_path / "gpufix_probe.prom"
    (tmp_path / "zero.json").symlink_to("/dev/zero")
    os.mkfifo(tmp_path / "fifo.json")
    (tmp_path / "big.json").write_bytes(b" " * ((16 << 20) + 1))
    for name in ("zero.json", "fifo.json", "big.json"):
        assert prog.main(["--prom-from", str(tmp_path / name), "--prom-out", str(out)]) == 3
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and ("regular file" in err or "larger than" in err)
    assert not out.exists()


def test_atomic_write_replaces(prog: types.ModuleType, tmp_path: Any) -> None:
    target = tmp_path / "probe.prom"
    target.write_text("old\n")
    prog.write_atomic(str(target), "new\n")
    assert target.read_text() == "new\n"
    assert [p.name for p in tmp_path.iterdir()] == ["probe.prom"]


def test_validate_accepts_program_verdicts_and_rejects_bad_ones(prog: types.ModuleType) -> None:
    good = verdict_of(prog, verdict="healthy")
    assert validate(good) is good
    assert good["experiment_budget_s"] == 180.0  # recorded: "budget spent" vs "not tried"
    bad = copy.deepcopy(good)
    bad["verdict"] = "fine"
    with pytest.raises(GpufixError, match=r"^probe verdict is invalid at verdict: "):
        validate(bad)
    hung_without_stall = verdict_of(prog, verdict="hung")
    with pytest.raises(GpufixError):
        validate(hung_without_stall)


def test_load_verdict_errors_are_one_line(tmp_path: Any) -> None:
    with pytest.raises(GpufixError, match="no probe verdict"):
        load_verdict(tmp_path / "missing.json")
    (tmp_path / "junk.json").write_text("{not json")
    with pytest.raises(GpufixError, match="cannot read probe verdict"):
        load_verdict(tmp_path / "junk.json")


def test_a_summary_says_when_experiments_were_skipped(prog: types.ModuleType) -> None:
    """Skipped is evidence of nothing; the line says so and what to do (review of issue 12,
    defect 10: "2 experiments, none healthy" while five more were skipped)."""

    def exp(exp_id: str, verdict: str) -> dict[str, Any]:
        return {"id": exp_id, "env": {}, "gpus": None, "verdict": verdict, "stalled": None,
                "error": None, "elapsed_s": 1.0}  # fmt: skip

    some = verdict_of(
        prog,
        verdict="hung",
        stalled={"phase": "barrier", "ranks": [1], "waiting": [0]},
        experiments=[exp("p2p-off", "hung"), exp("shm-off", "skipped"), exp("ib-off", "skipped")],
        no_p2p_rerun={"verdict": "hung"},
    )
    line = summarize(some)
    assert "1 experiment, none healthy" in line
    assert "2 experiments skipped: rerun with a bigger --experiment-budget" in line
    none_ran = verdict_of(
        prog,
        verdict="hung",
        stalled={"phase": "barrier", "ranks": [1], "waiting": [0]},
        experiments=[exp("p2p-off", "skipped")],
        no_p2p_rerun={"verdict": "skipped"},
    )
    line = summarize(none_ran)
    assert "no-P2P rerun" not in line and "1 experiment skipped" in line


def test_summaries(prog: types.ModuleType) -> None:
    hung = verdict_of(
        prog,
        verdict="hung",
        stalled={"phase": "pg_init", "ranks": [1], "waiting": [0]},
        single_gpu={"verdict": "healthy", "init_s": 0.8},
        no_p2p_rerun={"verdict": "healthy"},
        causes=prog.find_causes({"main": HUNG_PG, "rerun": OK, "single": OK}),
    )
    assert summarize(hung) == (
        "hung in pg_init on ranks [1] after 30.0 s; single GPU fine (0.8 s); "
        "no-P2P rerun healthy → likely P2P path (ACS/IOMMU) [pcie-acs]"
    )
    # a gloo run's baseline is one CPU rank, not a GPU (a review, 2026-12-06)
    cpu = {**hung, "backend": "gloo", "causes": [], "no_p2p_rerun": None}
    assert "; one rank alone fine (0.8 s)" in summarize(cpu) and "GPU" not in summarize(cpu)
    healthy = verdict_of(
        prog,
        verdict="healthy",
        duration_s=6.1,
        allreduce=[{"bytes": 1 << 27, "algbw_gbps": 20.0, "busbw_gbps": 20.0}],
    )
    assert summarize(healthy) == "healthy: 2 ranks (nccl) in 6.1 s; busbw 20.0 GB/s at 128 MiB"
    failed = verdict_of(
        prog,
        verdict="failed",
        failed_in={"phase": "cuda_init", "ranks": [0]},
        error="rank 0 in cuda_init: RuntimeError: Driver/library version mismatch",
        causes=[{"id": "driver-mismatch", "strategy": "driver-pin", "why": "..."}],
    )
    assert summarize(failed).startswith("failed in cuda_init on ranks [0]: rank 0 in cuda_init")
    assert summarize(failed).endswith("→ likely driver/library version mismatch [driver-pin]")
    na = verdict_of(prog, notes=["no NVIDIA GPU visible (...)"])
    assert summarize(na) == "not applicable: no NVIDIA GPU visible (...)"
    for v in (hung, healthy, failed, na):
        assert "\n" not in summarize(v)


def test_a_copy_that_cannot_be_written_loses_no_verdict(
    prog: types.ModuleType,
    tmp_path: Any,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The role passes --json-out /var/lib/gpufix/probe.json (and --prom-out for node_exporter):
    a full /var or a read-only textfile directory made the program print a traceback and no
    verdict, and exit 1, which the role turned into its own `failed` stand-in (probe review,
    2026-12-06). The verdict goes to stdout first; each copy that fails is one line."""
    import errno

    made = verdict_of(prog, verdict="healthy")

    def supervise(ns: argparse.Namespace, sigs: Any) -> dict[str, Any]:
        ns.interrupted = 0
        return made

    def full(path: str, text: str) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(prog, "supervise", supervise)
    monkeypatch.setattr(prog, "Signals", lambda: None)
    monkeypatch.setattr(prog, "write_atomic", full)
    out, prom = tmp_path / "probe.json", tmp_path / "probe.prom"
    out.write_text('{"verdict": "healthy"}')  # the last run's copies
    prom.write_text('gpufix_probe_verdict{verdict="healthy"} 1.0\n')
    assert prog.main(["--cpu", "--json-out", str(out), "--prom-out", str(prom)]) == 0
    got = capsys.readouterr()
    assert json.loads(got.out)["verdict"] == "healthy"
    lines = got.err.splitlines()
    assert len(lines) == 2 and all("not written: No space left on device" in x for x in lines)
    assert not out.exists() and not prom.exists()  # no older copy left to say an old verdict
    assert "--json-out" in lines[0] and "--prom-out" in lines[1]

    src = tmp_path / "made.json"
    src.write_text(json.dumps(made))
    assert prog.main(["--prom-from", str(src), "--prom-out", str(prom)]) == 1
    assert capsys.readouterr().err.count("\n") == 1


def test_the_run_files_go_where_there_is_room(
    prog: types.ModuleType,
    tmp_path: Any,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A full TMPDIR made every rank fail to write its events, which read as a Python that
    cannot import torch (cause torch-import); a '?' in it cut the file:// store URL and failed
    every run in pg_init (probe review, 2026-12-06). The run's files go to the first directory
    with room and a plain path; with none, one line and exit 3 (no verdict about the host)."""
    import os

    odd = tmp_path / "we?ird"
    full = tmp_path / "full"
    roomy = tmp_path / "roomy"
    for d in (odd, full, roomy):
        d.mkdir()
    real = os.statvfs

    class Vfs:
        def __init__(self, free: int) -> None:
            self.f_bavail, self.f_frsize = free, 1

    def statvfs(path: str) -> Any:
        if path.startswith(str(full)) or path in ("/var/tmp", "/tmp"):
            return Vfs(8 << 10)
        return Vfs(1 << 30) if path.startswith(str(roomy)) else real(path)

    monkeypatch.setattr(prog.os, "statvfs", statvfs)
    monkeypatch.setattr(prog.tempfile, "gettempdir", lambda: str(odd))
    monkeypatch.chdir(roomy)
    where, passed = prog.run_parent()
    assert where == str(roomy)
    assert passed[0] == f"{odd} (a '?' or '#' in the path)"
    assert "/var/tmp (8 KiB free)" in passed and "/tmp (8 KiB free)" in passed

    monkeypatch.chdir(full)
    assert prog.run_parent()[0] is None
    assert prog.main(["--cpu", "--world-size", "2"]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no directory for the run's files" in err
    assert f"{full} (8 KiB free)" in err


def test_an_nccl_log_dir_that_cannot_be_written_is_bad_input(
    prog: types.ModuleType, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """--nccl-log in a read-only place ended in a traceback from os.mkdir (probe review)."""
    assert prog.main(["--cpu", "--nccl-log", "/proc/gpufix-nccl-logs"]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--nccl-log: cannot make /proc/gpufix-nccl-logs" in err


def test_a_deadline_spent_before_any_worker_names_no_nvidia_smi_on_cpu(tmp_path: Any) -> None:
    """On --cpu no nvidia-smi runs, yet the verdict blamed it (probe review, 2026-12-06)."""
    import subprocess
    import sys

    cmd = [sys.executable, str(program_path()), "--cpu", "--world-size", "2"]
    proc = subprocess.run(
        [*cmd, "--deadline", "0.001"], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    v = json.loads(proc.stdout)
    assert proc.returncode == 1 and v["verdict"] == "failed"
    assert v["error"].startswith("the probe deadline (0.001 s) ran out before any worker started")
    assert "nvidia-smi" not in v["error"]


def test_the_summary_says_what_stopped_a_run_and_stays_one_line() -> None:
    """A review (2026-12-06): a stall stopped by SIGTERM after 5 s said "after 30.0 s" (the
    phase deadline), an import stall the same, a verdict with no failing rank said "failed in
    None on ranks []", and NCCL's multi-line error made a four-line "HOST: ..." line."""
    base = {"format": "gpufix-probe", "version": 1, "deadline_s": 120, "phase_deadline_s": 30.0}
    by_signal = {**base, "verdict": "hung", "duration_s": 5.475,
                 "stalled": {"phase": "barrier", "ranks": [0, 1], "by": "SIGTERM"}}  # fmt: skip
    assert summarize(by_signal).startswith(
        "hung in barrier on ranks [0, 1]; interrupted by SIGTERM after 5.475 s"
    )
    at_import = {**base, "verdict": "hung", "stalled": {"phase": "import_torch", "ranks": [0]}}
    assert summarize(at_import).startswith("hung in import_torch on ranks [0] past the import")
    by_deadline = {
        **at_import,
        "stalled": {"phase": "allreduce", "ranks": [1], "by": "probe deadline"},
    }
    assert summarize(by_deadline).startswith("hung in allreduce on ranks [1] after 120 s")
    no_rank = {**base, "verdict": "failed", "error": "the probe printed no verdict"}
    assert summarize(no_rank).startswith("failed: the probe printed no verdict")
    nccl = {**base, "verdict": "failed", "failed_in": {"phase": "pg_init", "ranks": [0]},
            "error": "ncclInternalError\nLast error:\n\x1b]0;x\x07Socket"}  # fmt: skip
    line = summarize(nccl)
    assert "\n" not in line and "\x1b" not in line and "Last error:" in line


def test_a_verdict_a_host_returns_is_checked_like_a_file() -> None:
    """A review (2026-12-06): `gpufix probe HOST` took whatever JSON came back: a verdict missing
    its fields printed as healthy (exit 0), a wrong type was an internal error."""
    from gpufix.engine.signals import MADE_BY_GPUFIX
    from gpufix.probe.remote import _parse

    for bad in (
        {"format": "gpufix-probe", "verdict": "healthy"},
        {"format": "gpufix-probe", "version": 1, "verdict": "healthy", "stalled": "x"},
    ):
        got = _parse("h1", json.dumps(bad), "")
        assert got["verdict"] == "failed" and MADE_BY_GPUFIX in got["notes"], got
        assert "not one gpufix can read" in got["error"]
    deep = '{"format": "gpufix-probe", "x": ' + "[" * 5000 + "]" * 5000 + "}"
    assert _parse("h1", deep, "")["verdict"] == "failed"


def test_a_local_host_takes_the_inventorys_interpreter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A review (2026-12-06): for a host probed on this machine the inventory's
    gpufix_probe_python was passed over and gpufix's own interpreter ran (another torch than the
    training environment's), with no word of it."""
    import sys

    from gpufix.errors import InvalidInput
    from gpufix.probe import local, remote
    from gpufix.probe.options import ProbeOptions

    ran: list[str] = []

    def fake_run_local(*, python: str, args: list[str], timeout: float) -> dict[str, Any]:
        ran.append(python)
        return {"format": "gpufix-probe", "verdict": "healthy"}

    monkeypatch.setattr(local, "run_local", fake_run_local)
    inv = tmp_path / "inv.yml"
    train = "/opt/venvs/train/bin/python"
    inv.write_text(
        "all:\n  hosts:\n"
        f"    gpubox: {{ansible_connection: local, gpufix_probe_python: {train}}}\n"
        "    other: {ansible_connection: local}\n"
    )
    remote.probe_hosts(["gpubox", "other"], inv, options=ProbeOptions(cpu=True))
    assert ran == [train, sys.executable]
    remote.probe_hosts(["gpubox"], inv, options=ProbeOptions(cpu=True, python="/usr/bin/python3"))
    assert ran[-1] == "/usr/bin/python3"  # --python wins
    inv.write_text(
        "all:\n  hosts:\n    gpubox: {ansible_connection: local, gpufix_probe_python: py}\n"
    )
    with pytest.raises(InvalidInput, match="not an absolute path"):
        remote.probe_hosts(["gpubox"], inv, options=ProbeOptions(cpu=True))
