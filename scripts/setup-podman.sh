#!/usr/bin/env bash
# Host prerequisites for the molecule scenarios (Debian/Ubuntu hosts): podman, runc, debootstrap,
# dpkg-dev. Idempotent: installs only what is missing and changes no host configuration, because
# the scenarios pass --runtime=runc and ulimits per container (see molecule/_shared/README.md).
set -euo pipefail

need=()
for pair in podman:podman runc:runc debootstrap:debootstrap dpkg-scanpackages:dpkg-dev; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || need+=("${pair##*:}")
done
if [ "${#need[@]}" -eq 0 ]; then
  echo "setup-podman: podman, runc, debootstrap and dpkg-dev are present" >&2
else
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup-podman: missing ${need[*]}; run as root (or: sudo apt-get install ${need[*]})" >&2
    exit 1
  fi
  echo "setup-podman: installing ${need[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"
fi

# Report, without changing, what would break containers on this host.
if podman info --format '{{.Host.CgroupsVersion}}' 2>/dev/null | grep -qx v1; then
  echo "setup-podman: cgroups v1: crun cannot run here; scenarios select runc per container" >&2
fi
echo "setup-podman: ok ($(podman --version))" >&2
