"""Benchmarks for `gpufix apply` on podman containers (the e2e lab).

1. Re-running an applied plan changes nothing and is much quicker than the first run: the same
   plan file again (the journal says it is applied), and a fresh plan with the same steps (the
   playbooks run again and report changed=0).
2. Controller overhead: `gpufix apply --check` on N hosts against `ansible-playbook --check`
   of the same playbook on the same hosts, for N = 1, 2, 4.

    .venv/bin/python bench/apply_bench.py [--sizes 1,2,4]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))

from lab import PREPARE, REPO, Lab, new_prefix, start  # noqa: E402
from plans import NCCL_STEP, make_plans  # noqa: E402

VENV_BIN = ROOT / ".venv" / "bin"
TORCH = Path(os.environ.get("GPUFIX_E2E_TORCH", "/var/tmp/gpufix-e2e-torch"))


def _lab(n: int, work: Path) -> Lab:
    work.mkdir(parents=True, exist_ok=True)
    prefix = new_prefix()
    hosts = {f"h{i + 1}": f"{prefix}-h{i + 1}" for i in range(n)}
    lab = Lab(prefix, hosts, work / "inventory.yml", work / "state", work)
    hang = work / "hang"
    hang.mkdir(exist_ok=True)
    for cname in hosts.values():
        start(cname, {"torch": TORCH, "hang": hang})
    for h in hosts:
        lab.sh(h, PREPARE)
    lab.write_inventory()
    return lab


def _remove(lab: Lab) -> None:
    for cname in lab.hosts.values():
        subprocess.run(["podman", "rm", "-f", "-t", "0", cname], capture_output=True)


def _timed(argv: list[str], lab: Lab) -> tuple[float, subprocess.CompletedProcess]:
    t = time.perf_counter()
    r = subprocess.run(argv, capture_output=True, text=True, env=lab.env(), cwd=lab.workdir)
    return time.perf_counter() - t, r


def _gpufix(lab: Lab, *args: str) -> tuple[float, dict]:
    sec, r = _timed([str(VENV_BIN / "gpufix"), *args, "-i", str(lab.inventory), "--json"], lab)
    if r.returncode not in (0, 2):
        raise SystemExit(f"gpufix {' '.join(args)} exited {r.returncode}: {r.stderr[-2000:]}")
    return sec, json.loads(r.stdout)


def rerun(work: Path) -> dict[str, float]:
    lab = _lab(1, work)
    try:
        plan = work / "plan.json"
        make_plans(["h1"], lab.inventory, "nccl-profile", [NCCL_STEP], plan)
        first, doc1 = _gpufix(lab, "apply", str(plan), "--yes")
        again, doc2 = _gpufix(lab, "apply", str(plan), "--yes")
        assert doc1["hosts"][0]["changed"] >= 1 and doc2["already_applied"], (doc1, doc2)
        plan2 = work / "plan2.json"
        make_plans(["h1"], lab.inventory, "nccl-profile", [NCCL_STEP], plan2)
        fresh, doc3 = _gpufix(lab, "apply", str(plan2), "--yes")
        assert doc3["hosts"][0]["changed"] == 0, doc3
        return {"first_s": first, "same_plan_s": again, "fresh_plan_s": fresh}
    finally:
        _remove(lab)


def overhead(n: int, work: Path) -> dict[str, float]:
    lab = _lab(n, work)
    try:
        names = list(lab.hosts)
        plan = work / "plan.json"
        make_plans(names, lab.inventory, "nccl-profile", [NCCL_STEP], plan)
        ours, doc = _gpufix(
            lab, "apply", str(plan), "--check", "--yes", "--batch", "100%", "--no-canary"
        )
        assert all(h["state"] == "applied" for h in doc["hosts"]), doc
        argv = [
            str(VENV_BIN / "ansible-playbook"),
            "--check",
            "--diff",
            "-i",
            str(lab.inventory),
            "-l",
            ",".join(names),
            "-e",
            json.dumps(NCCL_STEP.vars),
            str(ROOT / "playbooks" / "nccl_profile.yml"),
        ]
        os.environ["ANSIBLE_CONFIG"] = str(ROOT / "ansible.cfg")  # the run's cwd is elsewhere
        plain, r = _timed(argv, lab)
        if r.returncode != 0:
            raise SystemExit(f"ansible-playbook failed: {r.stdout[-2000:]}")
        return {"gpufix_check_s": ours, "ansible_playbook_check_s": plain}
    finally:
        _remove(lab)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1,2,4")
    args = ap.parse_args()
    os.environ["PATH"] = f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"
    subprocess.run(
        [sys.executable, str(ROOT / "tests/fixtures/aptrepo/build.py"), str(REPO)],
        check=True,
        capture_output=True,
    )
    print(f"machine: {platform.platform()}, {os.cpu_count()} CPUs, podman containers")
    with tempfile.TemporaryDirectory(prefix="gpufix-bench-") as d:
        r = rerun(Path(d) / "rerun")
        print(
            f"re-run: first apply {r['first_s']:.1f} s; same plan again {r['same_plan_s']:.1f} s "
            f"(ratio {r['same_plan_s'] / r['first_s']:.2f}); fresh plan, same steps "
            f"{r['fresh_plan_s']:.1f} s, changed=0 (ratio {r['fresh_plan_s'] / r['first_s']:.2f})"
        )
        for n in (int(x) for x in args.sizes.split(",")):
            o = overhead(n, Path(d) / f"n{n}")
            print(
                f"N={n}: gpufix apply --check {o['gpufix_check_s']:.1f} s, ansible-playbook "
                f"--check {o['ansible_playbook_check_s']:.1f} s, ratio "
                f"{o['gpufix_check_s'] / o['ansible_playbook_check_s']:.2f}"
            )


if __name__ == "__main__":
    main()
