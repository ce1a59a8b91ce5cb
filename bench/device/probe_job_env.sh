#!/usr/bin/env bash
# The probe with a training job's own settings (--job-env) on a real GPU and real NCCL:
#  1. a harmless setting (NCCL_ALGO=Ring): healthy, the setting recorded in the verdict;
#  2. a broken one: NCCL_SOCKET_IFNAME==gpufix-none0 names no interface ('=' is an exact match),
#     so NCCL's bootstrap finds no socket interface; expect not healthy, job-env-off healthy,
#     decided_by job-env-off, cause job-setting;
#  3. both at once: expect job-env-off healthy, job-env-without-NCCL_ALGO not healthy (the
#     interface is still wrong), job-env-without-NCCL_SOCKET_IFNAME healthy, and
#     job_env_culprit NCCL_SOCKET_IFNAME.
# Usage: bench/device/probe_job_env.sh   (PYTHON=... to choose the interpreter; verdicts in $OUT)
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
probe="$root/roles/probe/files/gpufix_probe.py"
. "$root/bench/device/torch_python.sh"
out=${OUT:-$(mktemp -d)}
echo "python: $py ($("$py" -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version())'))"
command -v nvidia-smi >/dev/null && timeout 20 nvidia-smi -L

run() {  # label, then probe args
  local label=$1; shift
  local t0=$(date +%s.%N)
  "$py" "$probe" --backend nccl "$@" --json-out "$out/$label.json" >/dev/null 2>"$out/$label.err"
  local rc=$?
  local secs=$(awk "BEGIN{printf \"%.2f\", $(date +%s.%N) - $t0}")
  "$py" - "$out/$label.json" "$label" "$secs" "$rc" <<'PY'
import json, sys
path, label, secs, rc = sys.argv[1:]
try:
    v = json.load(open(path))
except Exception as exc:
    print("%s: no verdict (%s), rc=%s" % (label, exc, rc)); sys.exit(0)
where = v.get("stalled") or v.get("failed_in") or {}
print("%s: verdict=%s rc=%s wall=%ss world=%s where=%s error=%s" % (
    label, v["verdict"], rc, secs, v["world_size"], where, (v.get("error") or "")[:300]))
print("  job_env=%s decided_by=%s culprit=%s causes=%s" % (
    v.get("job_env"), v.get("decided_by"), v.get("job_env_culprit"), [c["id"] for c in v["causes"]]))
print("  experiments=%s" % [(e["id"], e["verdict"], e["elapsed_s"]) for e in v.get("experiments", [])])
print("  nccl_tail=%s" % [l[:160] for l in v.get("nccl_log_tail", [])[-4:]])
PY
  tail -n 2 "$out/$label.err"
}

run job-env-harmless --deadline 120 --phase-deadline 60 --no-single-gpu --job-env NCCL_ALGO=Ring
run job-env-broken --deadline 90 --phase-deadline 30 --no-single-gpu --experiment-budget 150 \
  --job-env NCCL_SOCKET_IFNAME==gpufix-none0
run job-env-culprit --deadline 90 --phase-deadline 30 --no-single-gpu --experiment-budget 200 \
  --job-env NCCL_SOCKET_IFNAME==gpufix-none0 --job-env NCCL_ALGO=Ring
exit 0
