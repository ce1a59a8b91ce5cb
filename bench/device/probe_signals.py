"""The probe stopped from outside, on a real GPU: verdict, exit status and no worker left.

    python3 bench/device/probe_signals.py [--python PY] [--out FILE] [--cpu]

Each case starts the probe with an injected stall (GPUFIX_PROBE_FAULT; the stalled rank ignores
SIGTERM like a process wedged in a driver call), waits until the rank has said it entered the
stalled phase, then stops it one way. With NCCL on a GPU the stall at `allreduce` comes after the
rank has made its CUDA context and NCCL communicator, so the stop has a real one to tear down.
`--cpu` runs the same cases with gloo (two ranks) to check this script where there is no GPU.
Prints one line per case; `--out` keeps every verdict and reading as one JSON file.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROBE = os.path.join(ROOT, "roles", "probe", "files", "gpufix_probe.py")


def workers(token: str) -> list[int]:
    """Live probe workers whose command line holds token."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if token in cmd and "--worker" in cmd and state != "Z":
            out.append(int(pid))
    return out


def entered(tmp: str, rank: int, phase: str) -> bool:
    for path in glob.glob(f"{tmp}/gpufix-probe-*/main/rank{rank}.jsonl"):
        with open(path) as f:
            for line in f:
                try:
                    e = json.loads(line)
                except ValueError:
                    continue  # a line still being written
                if e.get("e") == "enter" and e.get("p") == phase:
                    return True
    return False


def gpu_memory_used() -> list[int] | None:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=20,
        ).stdout  # fmt: skip
        return [int(x) for x in out.split()]
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return None


def wait_for(check, seconds: float) -> float | None:
    """Seconds until check() held, None if it never did."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        if check():
            return round(time.monotonic() - t0, 2)
        time.sleep(0.05)
    return None


def case(py: str, cpu: bool, name: str, fault: str, sig: int | None, phase_deadline: float):
    tmp = tempfile.mkdtemp(prefix=f"gpufix-sig-{name}-")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUFIX_PROBE", "NCCL_"))}
    env.update(TMPDIR=tmp, GPUFIX_PROBE_FAULT=fault, PYTHONUNBUFFERED="1")
    args = ["--no-single-gpu", "--no-experiments", "--deadline", "150"]
    args += ["--phase-deadline", str(phase_deadline), "--import-deadline", "120"]
    args += ["--cpu", "--world-size", "2"] if cpu else ["--backend", "nccl"]
    phase = fault.split(":")[1]
    mem0 = gpu_memory_used()
    t0 = time.monotonic()
    proc = subprocess.Popen(
        [py, PROBE, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    r: dict = {"case": name, "fault": fault, "signal": signal.Signals(sig).name if sig else None}
    r["reached_s"] = wait_for(lambda: entered(tmp, 0, phase), 120)
    r["workers_before"] = len(workers(tmp))
    r["gpu_mib_during"] = gpu_memory_used()
    t1 = time.monotonic()
    if sig == signal.SIGKILL:
        proc.kill()
        proc.wait()
        r["workers_gone_s"] = wait_for(lambda: not workers(tmp), 10)
        out = ""
    else:
        if sig is not None:
            proc.send_signal(sig)
        try:
            out, err = proc.communicate(timeout=200)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        r["stderr_tail"] = err.strip().splitlines()[-2:]
    r["stop_s"] = round(time.monotonic() - t1, 2)
    r["total_s"] = round(time.monotonic() - t0, 2)
    r["rc"] = proc.returncode
    time.sleep(1.0)
    r["workers_after"] = workers(tmp)
    r["gpu_mib_before"], r["gpu_mib_after"] = mem0, gpu_memory_used()
    try:
        v = json.loads(out)
        r["verdict"] = {k: v.get(k) for k in ("verdict", "stalled", "failed_in", "error")}
        r["verdict"]["nccl"] = (v.get("facts") or {}).get("nccl")
    except ValueError:
        r["verdict"] = None
    for pid in r["workers_after"]:
        os.kill(pid, signal.SIGKILL)
    return r


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--out")
    ap.add_argument("--cpu", action="store_true")
    ns = ap.parse_args()
    rank = "0"
    cases = [
        # (name, fault, signal, phase deadline)
        ("term-in-allreduce", f"stall:allreduce:{rank}", signal.SIGTERM, 90),
        ("int-in-cuda-init", f"stall:cuda_init:{rank}", signal.SIGINT, 90),
        ("kill-supervisor-in-allreduce", f"stall:allreduce:{rank}", signal.SIGKILL, 90),
        ("deadline-in-allreduce", f"stall:allreduce:{rank}", None, 10),
    ]
    if ns.cpu:  # gloo has no CUDA phase
        cases[1] = ("int-in-pg-init", f"stall:pg_init:{rank}", signal.SIGINT, 90)
    results = []
    for name, fault, sig, pd in cases:
        r = case(ns.python, ns.cpu, name, fault, sig, pd)
        results.append(r)
        print(json.dumps(r), flush=True)
    if ns.out:
        with open(ns.out, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
