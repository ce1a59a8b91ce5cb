#!/usr/bin/env bash
# Molecule's `dependency` step for every scenario: make sure the test images, the fixture apt
# repository and the collections exist. Each part is cached, so a second call costs ~1 s.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
python="${PYTHON:-.venv/bin/python}"
[ -x "$python" ] || python="python3"
if [ -z "${GPUFIX_SKIP_IMAGES:-}" ]; then
  tests/images/build.sh
fi
"$python" tests/fixtures/aptrepo/build.py tests/fixtures/aptrepo/build/repo
scripts/get-collections.sh
