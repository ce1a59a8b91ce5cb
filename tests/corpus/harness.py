"""Score the corpus through the real CLI: `gpufix plan CASE --facts SNAP --probe-verdict V --json`.

Each case becomes a schema-valid snapshot (snapshot.py) and probe verdict (verdict.py) in a
scratch directory; the installed console script plans from them in a subprocess; the case is a
hit when `plans[0].strategy` is the fix that worked and the plan's step variables match the
case's `expect` details.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from corpus.snapshot import snapshot_for
from corpus.verdict import verdict_for

HERE = Path(__file__).parent
CLI_TIMEOUT_S = 120


def cases() -> list[dict[str, Any]]:
    loaded: list[dict[str, Any]] = yaml.safe_load((HERE / "cases.yaml").read_text())
    return loaded


def expected() -> dict[str, dict[str, str]]:
    loaded: dict[str, dict[str, str]] = yaml.safe_load((HERE / "expected.yaml").read_text())
    return loaded or {}


def gpufix_cli() -> Path:
    """The console script installed next to this interpreter (the venv's `gpufix`)."""
    path = Path(sys.executable).parent / "gpufix"
    if not path.exists():
        raise FileNotFoundError(f"{path}: install the project into this venv (pip install -e .)")
    return path


@dataclass
class Result:
    id: str
    split: str
    klass: str
    want: str
    rc: int
    chosen: str | None = None
    first_alternative: str | None = None
    hit: bool = False
    why: str = ""
    held_back: list[str] = field(default_factory=list)
    stderr: str = ""


def _vars(plan: dict[str, Any]) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for step in plan.get("steps") or []:
        merged.update(step.get("vars") or {})
    return merged


def _branch(text: object) -> int | None:
    head = str(text or "").split(".")[0]
    return int(head) if head.isdigit() else None


def _release(text: object) -> tuple[int, ...]:
    core = str(text or "").split("+")[0]
    return tuple(int(p) for p in core.split(".") if p.isdigit())


def _direction(old: tuple[int, ...], new: tuple[int, ...]) -> str | None:
    if not old or not new or old == new:
        return None
    return "up" if new > old else "down"


def check_expect(case: dict[str, Any], plan: dict[str, Any]) -> str:
    """'' when every `expect` detail holds in the plan, else what differs."""
    want = case.get("expect") or {}
    env = case.get("environment") or {}
    got = _vars(plan)
    for key, value in want.items():
        if key == "nccl_profile":
            names = got.get("gpufix_nccl_profile_names") or []
            if value not in names:
                return f"nccl profiles {names}, want {value}"
        elif key == "driver_direction":
            old = _branch(env.get("driver"))
            new = _branch(got.get("gpufix_driver_branch"))
            moved = (
                "up" if old and new and new > old else "down" if old and new and new < old else None
            )
            if moved != value:
                return (
                    f"driver {env.get('driver')} -> {got.get('gpufix_driver_branch')}, want {value}"
                )
        elif key == "stack_direction":
            new_torch = got.get("gpufix_ml_stack_torch_version")
            moved = _direction(_release(env.get("torch")), _release(new_torch))
            if moved != value:
                return f"torch {env.get('torch')} -> {new_torch}, want {value}"
        elif key == "container_host_network":
            if bool(got.get("gpufix_container_runtime_multi_node")) != bool(value):
                return f"host networking {got.get('gpufix_container_runtime_multi_node')}, want {value}"
        else:
            raise ValueError(f"{case['id']}: unknown expect key {key!r}")
    return ""


def score(case: dict[str, Any], plan: dict[str, Any]) -> tuple[bool, str]:
    chosen = plan.get("strategy")
    if chosen != case["fix_strategy"]:
        return False, f"chose {chosen}, the fix was {case['fix_strategy']}"
    detail = check_expect(case, plan)
    return (not detail), detail


def run_case(case: dict[str, Any], workdir: Path) -> Result:
    snap = snapshot_for(case)
    verdict, held = verdict_for(case, len(snap["facts"]["gpus"]))
    facts_path = workdir / f"{case['id']}.facts.json"
    verdict_path = workdir / f"{case['id']}.verdict.json"
    facts_path.write_text(json.dumps(snap, indent=1))
    verdict_path.write_text(json.dumps(verdict, indent=1))
    cmd = [str(gpufix_cli()), "plan", case["id"], "--facts", str(facts_path)]
    cmd += ["--probe-verdict", str(verdict_path), "--json"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=CLI_TIMEOUT_S, check=False)
    result = Result(
        id=case["id"],
        split=case["split"],
        klass=case["class"],
        want=case["fix_strategy"],
        rc=proc.returncode,
        held_back=held,
        stderr=proc.stderr.strip(),
    )
    if proc.returncode not in (0, 2):
        result.why = f"gpufix plan exited {proc.returncode}: {result.stderr[-300:]}"
        return result
    plan = json.loads(proc.stdout)["plans"][0]
    alternatives = [o["strategy"] for o in plan.get("options") or [] if o.get("feasible")]
    result.chosen = plan.get("strategy")
    result.first_alternative = next((s for s in alternatives if s != result.chosen), None)
    result.hit, result.why = score(case, plan)
    return result


def run_all(selected: Iterable[dict[str, Any]], workers: int = 4) -> list[Result]:
    """Every case through the CLI, a few at a time; results in case order."""
    with (
        tempfile.TemporaryDirectory(prefix="gpufix-corpus-") as tmp,
        ThreadPoolExecutor(max_workers=workers) as pool,
    ):
        return list(pool.map(lambda c: run_case(c, Path(tmp)), list(selected)))
