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
if [ "$#" -gt 0 ]; then
  pytest -q "$@"
  rc=$?
else
  # Three streams at once: the molecule scenarios in two halves (each half one scenario at a
  # time) beside everything else. Most of their time is apt, systemd and deadlines, not CPU.
  # What they share (images, the fixture repository, collections) is built once first; every
  # scenario and end-to-end test has containers of its own.
  bash molecule/_shared/ensure.sh >/dev/null
  mapfile -t scenarios < <(find molecule -mindepth 2 -maxdepth 2 -name molecule.yml \
    -not -path 'molecule/_*' | cut -d/ -f2 | sort)
  half_a=() half_b=()
  for i in "${!scenarios[@]}"; do
    if (( i % 2 == 0 )); then half_a+=("${scenarios[$i]}"); else half_b+=("${scenarios[$i]}"); fi
  done
  logs=$(mktemp -d)
  ids_a=() ids_b=()
  for s in "${half_a[@]}"; do ids_a+=("tests/test_molecule.py::test_scenario[$s]"); done
  for s in "${half_b[@]}"; do ids_b+=("tests/test_molecule.py::test_scenario[$s]"); done
  # The docs' lab session (about 10 min, containers of its own) evens the streams out.
  lab="tests/test_docs.py::test_lab_sessions_run_as_written"
  ids_b+=("$lab")
  # The interim apply end-to-end test (about 1.5 min) and the fleet rollback one (about 4.5 min)
  # go with the shorter half.
  interim="tests/e2e/test_apply_interim.py"
  fleet="tests/e2e/test_apply_e2e.py::test_kernel_upgrade_fleet_probe_hung_rolls_back_then_retries"
  ids_a+=("$interim" "$fleet")
  pytest -q --durations=10 "${ids_a[@]}" >"$logs/a" 2>&1 &
  a=$!
  pytest -q --durations=10 "${ids_b[@]}" >"$logs/b" 2>&1 &
  b=$!
  pytest -q --durations=25 -m "not molecule" --deselect "$lab" --deselect "$fleet" \
    --ignore "$interim"
  rc=$?
  wait "$a"; rc_a=$?
  wait "$b"; rc_b=$?
  echo "== molecule scenarios: ${half_a[*]}, the interim and fleet applies" >&2; cat "$logs/a"
  echo "== molecule scenarios: ${half_b[*]} and the docs lab" >&2; cat "$logs/b"
  rm -rf "$logs"
  for r in "$rc_a" "$rc_b"; do
    if [ "$r" != 0 ] && [ "$rc" = 0 ]; then rc=$r; fi
  done
fi
set -e
if [ "$rc" = 5 ]; then
  echo "test: pytest collected no tests" >&2
  exit 1
fi
echo "test: finished in $(( $(date +%s) - start )) s" >&2
exit "$rc"
