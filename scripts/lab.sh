#!/usr/bin/env bash
# A disposable lab of bionic-identity container hosts for plan -> apply -> reboot -> probe ->
# rollback, without a real host:  bash scripts/lab.sh up | down | status  [--dir DIR]
# `up` writes DIR/lab.yml (default: the current directory). Needs what
# `bash scripts/install.sh --test` sets up (podman, the images, the fixture repository tools).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
python="$root/.venv/bin/python"
if [ ! -x "$python" ]; then
  echo "lab: no $root/.venv: run bash scripts/install.sh --test first" >&2
  exit 1
fi
exec "$python" "$root/scripts/labctl.py" "$@"
