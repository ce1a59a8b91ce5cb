#!/usr/bin/env bash
# Create .venv and install gpufix into it (editable: the controller runs the playbooks and
# roles of this checkout). With --test: also the test tools (promtool among them), torch's CPU
# build for the probe tests, podman and its prerequisites, the collections and the test images.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

python="${PYTHON:-python3}"
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
  echo "install: gpufix's controller needs Python >= 3.10 (found $("$python" -V 2>&1))" >&2
  exit 1
fi
if ! "$python" -m venv --help >/dev/null 2>&1 || ! "$python" -c 'import ensurepip' 2>/dev/null; then
  if command -v apt-get >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
  fi
fi
# promtool (monitoring/ tests) from Debian's prometheus package: only the binary, into .venv/bin,
# so no Prometheus server is installed or started on this machine.
install_promtool() {
  if command -v promtool >/dev/null || [ -x .venv/bin/promtool ]; then return 0; fi
  local tmp
  tmp="$(mktemp -d)"
  if ! (cd "$tmp" && apt-get download prometheus >/dev/null 2>&1); then
    apt-get update -qq && (cd "$tmp" && apt-get download prometheus >/dev/null)
  fi
  dpkg-deb --fsys-tarfile "$tmp"/prometheus_*.deb | tar -x -C "$tmp" ./usr/bin/promtool
  install -m 0755 "$tmp/usr/bin/promtool" .venv/bin/promtool
  rm -rf "$tmp"
  echo "install: $(.venv/bin/promtool --version 2>&1 | head -1)" >&2
}

# pip install, silent when it works (this machine's index warnings, setuptools' notes on
# editable builds); its whole output and its exit status when it does not.
pip_install() {
  local log
  log="$(mktemp)"
  if ! .venv/bin/python -m pip install --quiet "$@" >"$log" 2>&1; then
    grep -v "^WARNING: Location" "$log" >&2 || true
    rm -f "$log"
    echo "install: pip install $* failed" >&2
    return 1
  fi
  rm -f "$log"
}

[ -x .venv/bin/python ] || "$python" -m venv .venv
pip_install --upgrade pip

if [ "${1:-}" = "--test" ]; then
  pip_install -e '.[test]'
  # The CPU build lies on this machine's disk; elsewhere pip fetches it from the CPU index.
  .venv/bin/python -m pip install --quiet "torch==2.13.0" 2>/dev/null \
    || .venv/bin/python -m pip install --quiet torch --index-url https://download.pytorch.org/whl/cpu
  bash scripts/setup-podman.sh
  install_promtool
  bash scripts/get-collections.sh
  bash tests/images/build.sh
else
  pip_install -e .
fi
echo "install: ready ($(.venv/bin/gpufix --version | head -1))" >&2
