#!/usr/bin/env bash
# Run the gpufix probe on a GPU machine: nccl on all GPUs, then fault-injected runs.
# Usage: bench/device/probe_gpu.sh            (PYTHON=/path/to/python to choose the interpreter)
# Verdicts land in $OUT (or a temp dir); NCCL logs stay in a temp dir. See docs/probe.md.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
probe="$root/roles/probe/files/gpufix_probe.py"
. "$root/bench/device/torch_python.sh"
work=$(mktemp -d)
out=${OUT:-$work}
trap 'rm -rf "$work"' EXIT
ngpu=$("$py" -c "import torch; print(torch.cuda.device_count())" 2>/dev/null || echo 0)
echo "python: $py ($("$py" -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)'))"
echo "GPUs visible to torch: $ngpu"
command -v nvidia-smi >/dev/null && timeout 20 nvidia-smi -L

show() {  # file label seconds rc
  "$py" - "$1" "$2" "$3" "$4" <<'PY'
import json, sys
path, label, secs, rc = sys.argv[1:]
try:
    v = json.load(open(path))
except Exception as exc:
    print("%-28s no verdict (%s), rc=%s, %s s" % (label, exc, rc, secs)); sys.exit(0)
where = v.get("stalled") or v.get("failed_in") or {}
print("%-28s verdict=%s rc=%s wall=%ss world=%s backend=%s where=%s error=%s"
      % (label, v["verdict"], rc, secs, v["world_size"], v["backend"], where, (v.get("error") or "")[:200]))
print("%-28s single_gpu=%s allreduce=%s" % ("", v.get("single_gpu"),
      [(a["bytes"], a["busbw_gbps"]) for a in v.get("allreduce", [])]))
print("%-28s phases=%s" % ("", [(p["phase"], p["rank"], None if p["end"] is None else round(p["end"] - p["start"], 3)) for p in v["phases"]]))
print("%-28s causes=%s nccl_tail=%s" % ("", [c["id"] for c in v["causes"]], v.get("nccl_log_tail", [])[:3]))
PY
}

run() {  # label, then probe args; env vars may precede via `env`
  local label=$1; shift
  local t0=$(date +%s.%N)
  "$@" --json-out "$out/$label.json" --nccl-log "$work/nccl-$label" >/dev/null 2>"$work/$label.err"
  local rc=$?
  local secs=$(awk "BEGIN{printf \"%.2f\", $(date +%s.%N) - $t0}")
  show "$out/$label.json" "$label" "$secs" "$rc"
  [ -s "$work/$label.err" ] && tail -n 3 "$work/$label.err"
}

# 1. The real thing: nccl, one rank per GPU (world size 1 on a one-GPU machine).
run healthy "$py" "$probe" --backend nccl --deadline 120 --phase-deadline 60 --prom-out "$out/probe.prom"
# 2. A stall injected into NCCL set-up on rank 0: expect hung in pg_init, ranks [0], in ~10 s.
run stall-pg-init env GPUFIX_PROBE_FAULT=stall:pg_init:0 "$py" "$probe" --backend nccl \
  --deadline 40 --phase-deadline 10 --no-single-gpu --no-p2p-rerun
# 3. Two ranks: on one GPU both share it (NCCL refuses duplicate GPUs: expect failed in pg_init).
run two-ranks "$py" "$probe" --backend nccl --world-size 2 --deadline 60 --phase-deadline 30 \
  --no-single-gpu --quick
exit 0
