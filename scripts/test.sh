#!/usr/bin/env bash
# The whole test suite, from a fresh machine: install, static checks, then pytest (unit,
# integration against podman containers, molecule scenarios). Exit non-zero on any failure.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
start=$(date +%s)

bash scripts/install.sh --test
export PATH="$root/.venv/bin:$PATH"   # molecule shells out to ansible-config
export GPUFIX_REQUIRE_PODMAN=1        # a missing podman fails the run instead of skipping

echo "== static checks" >&2
ruff check .
ruff format --check controller tests bench
mypy
vermin -t=3.6- --no-tips --violations plugins/modules/gpufix_facts.py roles/probe/files/gpufix_probe.py
yamllint -s .
ansible-lint --profile production roles playbooks

echo "== pytest" >&2
set +e
pytest -q "$@"
rc=$?
set -e
if [ "$rc" = 5 ]; then
  echo "test: pytest collected no tests" >&2
  exit 1
fi
echo "test: finished in $(( $(date +%s) - start )) s" >&2
exit "$rc"
