#!/usr/bin/env bash
# Install the collections named in requirements.yml into .ansible/collections without Galaxy:
# the `ansible` package on PyPI bundles them, so download its sdist/wheel once and extract only
# the collections we name. Cached: a collection already present at the wanted version is kept.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
dest="${ANSIBLE_COLLECTIONS_DEST:-.ansible/collections}"
cache="${GPUFIX_CACHE_DIR:-.cache}/ansible-bundle"
pip="${PIP:-.venv/bin/pip}"
[ -x "$pip" ] || pip="pip"
# The ansible package release that carries the wanted versions (see requirements.yml).
bundle="${GPUFIX_ANSIBLE_BUNDLE:-9.13.0}"

python="${PYTHON:-.venv/bin/python}"
[ -x "$python" ] || python="python3"

# "namespace.name version" per line, from requirements.yml.
wanted="$("$python" - <<'PY'
import yaml
with open("requirements.yml") as fh:
    data = yaml.safe_load(fh)
for c in data.get("collections", []):
    print(c["name"], c["version"])
PY
)"

have_version() {
  local manifest="$dest/ansible_collections/${1/.//}/MANIFEST.json"
  [ -f "$manifest" ] && "$python" -c 'import json,sys; print(json.load(open(sys.argv[1]))["collection_info"]["version"])' "$manifest"
}

missing=0
while read -r name version; do
  [ -n "$name" ] || continue
  if [ "$(have_version "$name" || true)" != "$version" ]; then missing=1; fi
done <<<"$wanted"
if [ "$missing" = 0 ]; then
  echo "get-collections: present in $dest" >&2
  exit 0
fi

mkdir -p "$cache" "$dest/ansible_collections"
archive="$(ls "$cache"/ansible-"$bundle"-*.whl "$cache"/ansible-"$bundle".tar.gz 2>/dev/null | head -n1 || true)"
if [ -z "$archive" ]; then
  echo "get-collections: downloading ansible==$bundle from PyPI (once)" >&2
  "$pip" download --quiet --no-deps --dest "$cache" "ansible==$bundle"
  archive="$(ls "$cache"/ansible-"$bundle"-*.whl "$cache"/ansible-"$bundle".tar.gz 2>/dev/null | head -n1 || true)"
  [ -n "$archive" ] || { echo "get-collections: download of ansible==$bundle failed" >&2; exit 1; }
fi

while read -r name version; do
  [ -n "$name" ] || continue
  rel="ansible_collections/${name/.//}"
  rm -rf "${dest:?}/$rel"
  "$python" - "$archive" "$rel" "$dest" <<'PY'
import sys, tarfile, zipfile, os
archive, rel, dest = sys.argv[1:]
if archive.endswith(".whl"):
    with zipfile.ZipFile(archive) as zf:
        members = [m for m in zf.namelist() if m.startswith(rel + "/")]
        zf.extractall(dest, members)
else:
    with tarfile.open(archive) as tf:
        top = tf.getnames()[0].split("/")[0]
        prefix = top + "/" + rel + "/"
        for m in tf.getmembers():
            if m.name.startswith(prefix) and (m.isfile() or m.isdir()):
                m.name = m.name[len(top) + 1:]
                tf.extract(m, dest)
if not os.path.isdir(os.path.join(dest, rel)):
    sys.exit("get-collections: %s not found in %s" % (rel, archive))
PY
  got="$(have_version "$name")"
  if [ "$got" != "$version" ]; then
    echo "get-collections: $name is $got in ansible==$bundle, requirements.yml wants $version" >&2
    exit 1
  fi
  echo "get-collections: $name $got -> $dest" >&2
done <<<"$wanted"
