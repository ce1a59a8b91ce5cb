"""Controller-side helpers for the probe: find it, run it here, validate and summarise verdicts."""

from __future__ import annotations

import importlib.util
import json
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from types import ModuleType
from typing import Any

import jsonschema

from gpufix import paths
from gpufix.errors import GpufixError, InvalidInput

# Seconds the runner waits beyond the probe's own --deadline before it gives up: the probe
# spends up to a couple of seconds killing workers and writing its verdict.
_MARGIN_S = 15.0
_DEFAULT_DEADLINE_S = 120.0

# Short names for cause ids in one-line summaries.
_CAUSE_LABELS = {
    "p2p-path": "P2P path (ACS/IOMMU)",
    "p2p-slow-copy": "P2P copies at a fraction of the link rate (ACS)",
    "driver-mismatch": "driver/library version mismatch",
    "driver-too-old": "driver too old for torch's CUDA",
    "shm": "shared memory (/dev/shm) too small",
    "nccl-transport": "NCCL transport or interface choice",
    "gpu-init": "CUDA initialisation (driver state)",
    "single-gpu-fallback": "multi-GPU path only",
}


def program_path() -> Path:
    """The standalone probe program, as shipped to hosts by roles/probe."""
    return paths.probe_program()


def load_program() -> ModuleType:
    """The probe program as a module (its cause table and parsers), loaded from its file."""
    spec = importlib.util.spec_from_file_location("gpufix_probe_program", program_path())
    if spec is None or spec.loader is None:
        raise GpufixError(f"cannot load the probe program from {program_path()}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def schema() -> dict[str, Any]:
    text = resources.files("gpufix").joinpath("schemas/probe.schema.json").read_text("utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def validate(verdict: object) -> dict[str, Any]:
    """Check a verdict against probe.schema.json; return it, or raise a one-line GpufixError."""
    validator = jsonschema.Draft202012Validator(schema())
    error = jsonschema.exceptions.best_match(validator.iter_errors(verdict))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "(top)"
        raise GpufixError(f"probe verdict is invalid at {where}: {error.message}")
    assert isinstance(verdict, dict)
    return verdict


def load_verdict(path: Path) -> dict[str, Any]:
    """Read and validate a verdict file (--json-out of the probe), through the input layer
    (regular file, size cap, bounded JSON)."""
    from gpufix import inputs

    if not path.exists():
        raise InvalidInput(f"no probe verdict at {path}")
    try:
        data = inputs.parse_json(inputs.read_text(path, "verdict"), "it")
    except InvalidInput as exc:
        raise InvalidInput(f"cannot read probe verdict {path}: {exc}") from None
    return validate(data)


def _deadline(args: Sequence[str]) -> float:
    for i, arg in enumerate(args):
        value = None
        if arg == "--deadline" and i + 1 < len(args):
            value = args[i + 1]
        elif arg.startswith("--deadline="):
            value = arg.split("=", 1)[1]
        if value is not None:
            try:
                return float(value)
            except ValueError:
                break  # the probe itself reports the bad value
    return _DEFAULT_DEADLINE_S


def run_local(
    python: str = sys.executable,
    args: Sequence[str] = (),
    timeout: float | None = None,
    env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Run the probe on this machine with `python`; return its validated verdict.

    `timeout` defaults to the probe's --deadline plus a margin. The probe never hangs by
    design; if it does overrun, it gets SIGTERM (it then kills its workers) and, 5 s later,
    SIGKILL.
    """
    limit = timeout if timeout is not None else _deadline(args) + _MARGIN_S
    cmd = [python, str(program_path()), *args]
    try:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(env) if env is not None else None,
        )
    except OSError as exc:
        raise InvalidInput(f"cannot run the probe with {python}: {exc.strerror}") from None
    try:
        out, err = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
        raise GpufixError(f"the probe did not return within {limit:.0f} s") from None
    if proc.returncode == 3:
        raise InvalidInput(_last_line(err) or "the probe rejected its arguments")
    try:
        verdict = json.loads(out)
    except ValueError:
        raise GpufixError(
            f"the probe exited {proc.returncode} without a verdict: {_last_line(err)}"
        ) from None
    return validate(verdict)


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def _ranks(where: Mapping[str, Any]) -> str:
    return "[" + ", ".join(str(r) for r in where.get("ranks", [])) + "]"


def summarize(verdict: Mapping[str, Any]) -> str:
    """One line for a human: what happened, where, and the likely cause."""
    kind = verdict.get("verdict")
    parts: list[str] = []
    if kind == "not-applicable":
        notes = verdict.get("notes") or []
        return "not applicable: " + (notes[0] if notes else "no GPU")
    if kind == "hung":
        stall = verdict.get("stalled") or {}
        by_deadline = stall.get("by") == "probe deadline"
        after = verdict.get("deadline_s") if by_deadline else verdict.get("phase_deadline_s")
        parts.append(f"hung in {stall.get('phase')} on ranks {_ranks(stall)} after {after} s")
    elif kind == "failed":
        where = verdict.get("failed_in") or {}
        parts.append(
            f"failed in {where.get('phase')} on ranks {_ranks(where)}: {verdict.get('error')}"
        )
    elif kind == "degraded":
        slow = verdict.get("slow") or []
        what = [f"{s['phase']} on ranks {_ranks(s)} ({s['seconds']:.1f} s)" for s in slow]
        what += verdict.get("notes") or []
        parts.append("degraded: " + ("; ".join(what) if what else "slow"))
    else:
        parts.append(
            f"healthy: {verdict.get('world_size')} ranks ({verdict.get('backend')}) "
            f"in {verdict.get('duration_s')} s"
        )
        allreduce = verdict.get("allreduce") or []
        if allreduce:
            big = allreduce[-1]
            parts.append(f"busbw {big['busbw_gbps']} GB/s at {big['bytes'] >> 20} MiB")
    single = verdict.get("single_gpu")
    if single:
        if single.get("verdict") == "healthy":
            parts.append(f"single GPU fine ({single.get('init_s')} s)")
        else:
            parts.append(f"single GPU {single.get('verdict')} too")
    rerun = verdict.get("no_p2p_rerun")
    if rerun:
        parts.append(f"no-P2P rerun {rerun.get('verdict')}")
    text = "; ".join(parts)
    causes = verdict.get("causes") or []
    if causes:
        first = causes[0]
        label = _CAUSE_LABELS.get(first["id"], first["id"])
        text += f" → likely {label} [{first['strategy']}]"
    return text
