#!/usr/bin/env bash
# One prepared GPU check (device machine): the facts module on real NVIDIA tools, raw tool
# outputs for the parser fixtures, then the probe script. Writes to $OUT (or a temp dir).
# Afterwards, on any machine: gpufix plan x --facts OUT/facts.snapshot.json --probe-verdict OUT/healthy.json
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-$(mktemp -d)}
py=${PYTHON:-python3}
export PYTHONUNBUFFERED=1
echo "== facts module (stdlib, $($py -V 2>&1))"
t0=$(date +%s.%N)
tmp=$(mktemp -d)
"$py" "$root/plugins/modules/gpufix_facts.py" --local >"$tmp/facts.json" 2>"$out/facts.err"
echo "rc=$? in $(awk "BEGIN{printf \"%.2f\", $(date +%s.%N) - $t0}") s"
"$py" - "$tmp/facts.json" "$out/facts.snapshot.json" <<'PY'
import json, sys, datetime, socket
f = json.load(open(sys.argv[1]))
doc = {"format": "gpufix-facts", "version": 1, "host": socket.gethostname(),
       "gathered_at": datetime.datetime.utcnow().strftime("%Y-%m-%dT%H:%M:%SZ"), "facts": f}
json.dump(doc, open(sys.argv[2], "w"), indent=1)
for k in ("os", "kernel", "gpus", "driver", "topology", "p2p", "pcie", "iommu", "shm", "cuda_toolkits",
          "python_envs", "fabricmanager", "containers", "nccl", "kernel_log"):
    print(k, "=", json.dumps(f.get(k))[:300])
PY
{
  for c in "nvidia-smi --query-gpu=index,name,pci.bus_id,memory.total,compute_cap,uuid --format=csv,noheader,nounits" \
           "nvidia-smi --query-gpu=driver_version --format=csv,noheader" "nvidia-smi topo -m" "nvidia-smi topo -p2p r" \
           "cat /proc/driver/nvidia/version" "nvidia-smi --query-compute-apps=pid,process_name,gpu_uuid,used_memory --format=csv,noheader,nounits"; do
    echo "### $c"; timeout 20 $c 2>&1; echo "### rc=$?"
  done
} >"$out/tool_outputs.txt"
echo "== probe"
OUT="$out" bash "$root/bench/device/probe_gpu.sh"
