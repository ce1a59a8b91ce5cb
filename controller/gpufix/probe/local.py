"""Controller-side helpers for the probe: find it, run it here, validate verdicts."""

from __future__ import annotations

import contextlib
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

from gpufix import paths, schema_check
from gpufix.errors import GpufixError, InvalidInput

# Callers outside this folder (preflight) import summarize from here.
from gpufix.probe.summary import summarize as summarize

# Seconds the runner waits beyond the probe's own --deadline before it gives up: the probe
# spends up to a couple of seconds killing workers and writing its verdict.
_MARGIN_S = 15.0
_DEFAULT_DEADLINE_S = 120.0


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
    validator = schema_check.validator(schema())
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


def _option(args: Sequence[str], name: str, default: float) -> float:
    for i, arg in enumerate(args):
        value = None
        if arg == name and i + 1 < len(args):
            value = args[i + 1]
        elif arg.startswith(name + "="):
            value = arg.split("=", 1)[1]
        if value is not None:
            try:
                return float(value)
            except ValueError:
                break  # the probe itself reports the bad value
    return default


def _own_time(args: Sequence[str]) -> float:
    """The longest the program may take by its own deadlines: the probe, then experiments."""
    budget = 0.0 if "--no-experiments" in args else _option(args, "--experiment-budget", 180.0)
    return _option(args, "--deadline", _DEFAULT_DEADLINE_S) + budget


def run_local(
    python: str = sys.executable,
    args: Sequence[str] = (),
    timeout: float | None = None,
    env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Run the probe on this machine with `python`; return its validated verdict.

    `timeout` defaults to the probe's --deadline and experiment budget plus a margin. The probe never hangs by
    design; if it does overrun, it gets SIGTERM (it then kills its workers) and, 5 s later,
    SIGKILL.
    """
    limit = timeout if timeout is not None else _own_time(args) + _MARGIN_S
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
        # On SIGTERM the probe prints the verdict so far (the phase and ranks that stalled).
        try:
            return validate(json.loads(_stop(proc)))
        except (ValueError, GpufixError):
            raise GpufixError(f"the probe did not return within {limit:.0f} s") from None
    except BaseException:
        # Interrupted (the CLI turns SIGTERM into KeyboardInterrupt): the probe and its workers
        # must not outlive gpufix, holding the GPUs until the probe's own deadline.
        _stop(proc)
        raise
    if proc.returncode == 3:
        raise InvalidInput(_last_line(err) or "the probe rejected its arguments")
    try:
        verdict = json.loads(out)
    except ValueError:
        why = _last_line(err) or "it printed nothing on stderr"
        raise GpufixError(f"the probe exited {proc.returncode} without a verdict: {why}") from None
    return validate(verdict)


def _stop(proc: subprocess.Popen[str]) -> str:
    """SIGTERM the probe (its supervisor then kills its workers), SIGKILL it 5 s later; what it
    printed on stdout by then ("" when it had to be killed)."""
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.communicate(timeout=5)[0] or ""
    except subprocess.TimeoutExpired:
        proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.communicate(timeout=5)
        return ""


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else ""
