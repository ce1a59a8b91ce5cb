"""Plan every variant the ninth to fourteenth and nineteenth to thirty-second outside reviews scored, from the reviewers' own
input files (manifest.json, cases/), and print the hits per review: by strategy name, and with
the detail the reviewer judged (a profile, a driver branch, a direction).

    .venv/bin/python bench/outside_reviews/rerun.py                # this checkout's code
    .venv/bin/python bench/outside_reviews/rerun.py --code DIR     # another checkout's controller/

`--code` runs gpufix from DIR/controller (a worktree of an older commit: `git worktree add DIR
ac80b0b`), so the two runs side by side give the before and after counts docs/decision.md
reports. Expected strategies are the reviewers' own, written before they ran gpufix.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def _vars(plan: dict[str, Any]) -> list[dict[str, Any]]:
    return [s.get("vars") or {} for s in plan.get("steps") or []]


def _profiles(plan: dict[str, Any]) -> list[str]:
    return [n for v in _vars(plan) for n in v.get("gpufix_nccl_profile_names") or []]


def detail_holds(spec: Any, plan: dict[str, Any]) -> bool:
    """The reviewer's detail check, as the manifest writes it: [kind, argument]."""
    kind, arg = spec
    if kind == "profile":
        return arg in _profiles(plan)
    if kind == "profile_any":
        return any(a in _profiles(plan) for a in arg)
    if kind == "vars_contains":
        return arg in json.dumps(_vars(plan))
    if kind == "direction":
        return (plan.get("extra") or {}).get("stack_direction") == arg
    if kind == "driver_branch":
        return any(str(v.get("gpufix_driver_branch")) == arg for v in _vars(plan))
    if kind == "finding_no_reboot":
        ids = [f.get("id") for f in plan.get("findings") or []]
        return arg in ids and not plan.get("reboot_required")
    if kind == "all":
        return all(detail_holds(s, plan) for s in arg)
    if kind == "any":
        return any(detail_holds(s, plan) for s in arg)
    raise ValueError(f"unknown detail check {kind!r}")


def plan_one(case: dict[str, Any], code: Path | None) -> tuple[int, dict[str, Any] | None]:
    args = [sys.executable, "-m", "gpufix", "plan", case["host"]]
    if case["inventory"]:
        args += ["-i", str(HERE / case["inventory"])]
    args += ["--facts", str(HERE / case["facts"])]
    if case["verdict"]:
        args += ["--probe-verdict", str(HERE / case["verdict"])]
    args += [*case["extra"], "--json"]
    env = dict(os.environ)
    if code is not None:
        env["PYTHONPATH"] = str(code / "controller")
    r = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
                       check=False)  # fmt: skip
    if r.returncode != 0:
        return r.returncode, None
    doc = json.loads(r.stdout)
    return 0, (doc["plans"][0] if "plans" in doc else doc)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--code", type=Path, help="a checkout whose controller/ to run instead")
    ns = ap.parse_args()
    cases = json.loads((HERE / "manifest.json").read_text())
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda c: plan_one(c, ns.code), cases))
    totals: dict[str, list[int]] = {}
    for case, (rc, plan) in zip(cases, results, strict=True):
        chosen = plan["strategy"] if plan else f"exit {rc}"
        hit = plan is not None and chosen in case["expected"]
        full = hit and (case["detail"] is None or detail_holds(case["detail"], plan))
        mark = ("full" if full else "name") if hit else "miss"
        scored = "" if case["scored"] else " (not scored)"
        print(f"{case['review']:10} {case['thread']:28} {case['variant']:30} "
              f"{case['expected'][0]:18} {chosen:18} {mark}{scored}")  # fmt: skip
        if case["scored"]:
            t = totals.setdefault(case["review"], [0, 0, 0])
            t[0], t[1], t[2] = t[0] + 1, t[1] + hit, t[2] + full
    print(f"\n{'review':10} {'scored':>6} {'by name':>8} {'full':>5}")
    for review, (n, hits, fulls) in totals.items():
        print(f"{review:10} {n:6} {hits:8} {fulls:5}")
    n, hits, fulls = (sum(t[i] for t in totals.values()) for i in range(3))
    print(f"{'all':10} {n:6} {hits:8} {fulls:5}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
