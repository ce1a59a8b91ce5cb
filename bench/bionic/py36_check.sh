#!/usr/bin/env bash
# The facts module and the probe on a real Ubuntu 18.04 userland: bionic's own Python 3.6.9
# and glibc 2.27, with the last torch release for Python 3.6 (1.10.2) on CPU (gloo). By hand,
# on a machine that reaches Ubuntu's archive and PyPI (CI reaches neither the archive nor a
# wheel this size). Needs root (debootstrap, chroot).
#   bash bench/bionic/py36_check.sh ROOT     # ROOT: an empty directory (about 2.5 GB)
# Prints one line per check; docs/probe.md "On a real bionic userland" has the result.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
R=${1:?usage: py36_check.sh ROOT}
[ -x "$R/usr/bin/python3.6" ] ||
  debootstrap --variant=minbase --include=python3 bionic "$R" http://archive.ubuntu.com/ubuntu
site="$R/opt/gpufix-py36"
if [ ! -d "$site/torch" ]; then
  mkdir -p "$site" && tmp=$(mktemp -d)
  # exact files: pip's resolver here is held to this project's constraints
  for pkg in "torch 1.10.2-cp36-cp36m-manylinux1_x86_64" "setuptools 59.6.0-py3-none-any" \
             "typing-extensions 4.1.1-py3-none-any" "dataclasses 0.8-py3-none-any"; do
    set -- $pkg
    name=${1//-/_}; file="$name-$2.whl"; [ "$1" = typing-extensions ] && file="typing_extensions-$2.whl"
    url=$(curl -fsS "https://pypi.org/simple/$1/" | grep -o "https://[^\"#]*/$file" | head -1)
    curl -fsS -o "$tmp/$file" "$url" && python3 -m zipfile -e "$tmp/$file" "$site"
  done
  rm -rf "$tmp"
fi
mkdir -p "$R/tmp/gpufix" "$R/proc" && mountpoint -q "$R/proc" || mount -t proc proc "$R/proc"
cp "$root/plugins/modules/gpufix_facts.py" "$root/roles/probe/files/gpufix_probe.py" "$R/tmp/gpufix/"
in_root() { chroot "$R" env PYTHONPATH=/opt/gpufix-py36 TMPDIR=/tmp "$@"; }
echo "python $(in_root /usr/bin/python3.6 -V 2>&1), glibc $(in_root ldd --version | head -1 | awk '{print $NF}')"
t0=$(date +%s.%N)
in_root /usr/bin/python3.6 /tmp/gpufix/gpufix_facts.py --local >"$R/tmp/gpufix/facts.json"
secs=$(awk "BEGIN{printf \"%.2f\", $(date +%s.%N) - $t0}")
python3 -c "import json,sys; f=json.load(open(sys.argv[1])); print('facts', sys.argv[2], 's', f['os']['version_id'], f['glibc'], f['python']['version'], len(f), 'fields')" "$R/tmp/gpufix/facts.json" "$secs"
probe() {  # label, fault, probe args
  local label=$1 fault=$2; shift 2
  set +e
  ${WRAP:-} chroot "$R" env PYTHONPATH=/opt/gpufix-py36 TMPDIR=/tmp GPUFIX_PROBE_FAULT="$fault" \
    /usr/bin/python3.6 /tmp/gpufix/gpufix_probe.py --cpu \
    --world-size 2 --deadline 60 "$@" >"$R/tmp/gpufix/$label.json" 2>/dev/null
  local rc=$?
  set -e
  python3 -c "import json,sys; v=json.load(open(sys.argv[1])); print(sys.argv[2], 'rc', sys.argv[3], v['verdict'], v['duration_s'], 's', v.get('stalled') or v.get('failed_in'), [(e['id'], e['verdict']) for e in v.get('experiments', [])], v['facts'].get('torch'))" \
    "$R/tmp/gpufix/$label.json" "$label" "$rc"
}
probe healthy "" --no-experiments
probe stall "stall:allreduce:1" --phase-deadline 5 --no-experiments
probe crash "crash:pg_init:0" --no-experiments
probe p2p-experiment "stall:allreduce:*;unless=NCCL_P2P_DISABLE=1" --phase-deadline 5
probe soak "" --soak --soak-max-bytes 1M --no-experiments
# SIGTERM 8 s in, while rank 1 stalls (chroot and env exec the probe: the signal reaches it)
WRAP="timeout --preserve-status -s TERM 8" probe sigterm "stall:allreduce:1" --phase-deadline 50 \
  --no-experiments
umount "$R/proc" || true
