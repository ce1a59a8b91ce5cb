# Sourced by the device scripts: sets $py to $PYTHON, else the first interpreter that imports
# torch; exits 3 when there is none.
py=${PYTHON:-}
if [ -z "$py" ]; then
  for c in python3 python /opt/torch/.venv/bin/python3 /usr/bin/python3; do
    if command -v "$c" >/dev/null 2>&1 && "$c" -c "import torch" >/dev/null 2>&1; then py=$c; break; fi
  done
fi
[ -n "$py" ] || { echo "no python with torch found; set PYTHON" >&2; exit 3; }
