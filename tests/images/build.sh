#!/usr/bin/env bash
# Build the systemd container images the molecule scenarios run in, without a registry.
#   localhost/gpufix-bookworm:1          plain Debian 12 (bookworm) minbase + systemd + python3
#   localhost/gpufix-bionic-identity:1   the SAME Debian userland whose /etc/os-release and
#                                        /etc/lsb-release say Ubuntu 18.04 (bionic). It exercises
#                                        our roles' Ubuntu code paths, not Ubuntu itself.
# Images that already exist are reused; FORCE=1 rebuilds them.
set -euo pipefail

TAG="${GPUFIX_IMAGE_TAG:-1}"
BOOKWORM="localhost/gpufix-bookworm:${TAG}"
BIONIC="localhost/gpufix-bionic-identity:${TAG}"
# Packages the roles need at run time: python3-apt keeps the apt module from installing it
# (offline), python3-debian serves deb822_repository, dbus makes ansible.builtin.reboot work,
# pciutils/kmod give setpci/lspci/modinfo.
INCLUDE="python3,python3-apt,python3-debian,python3-venv,systemd,systemd-sysv,dbus,apt-utils,pciutils,kmod,procps,ca-certificates,gnupg"

log() { printf 'build.sh: %s\n' "$*" >&2; }

mirror() {
  # The machine's own Debian mirror: deb822 sources first, then the one-line format.
  local uri
  uri="$(grep -hsE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null \
    | awk '{print $2}' | grep -E '/debian/?$' | head -n1 || true)"
  if [ -z "$uri" ]; then
    uri="$(grep -hsE '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null \
      | awk '{for (i = 2; i <= NF; i++) if ($i ~ /^https?:/) {print $i; exit}}' \
      | grep -E '/debian/?$' | head -n1 || true)"
  fi
  printf '%s\n' "${uri:-http://deb.debian.org/debian}"
}

exists() { [ "${FORCE:-0}" != 1 ] && podman image exists "$1"; }

if exists "$BOOKWORM" && exists "$BIONIC"; then
  log "images present: $BOOKWORM $BIONIC"
  exit 0
fi

for tool in podman debootstrap; do
  command -v "$tool" >/dev/null || { log "missing $tool: run scripts/setup-podman.sh"; exit 1; }
done

work="$(mktemp -d "${TMPDIR:-/var/tmp}/gpufix-rootfs.XXXXXX")"
trap 'rm -rf "$work"' EXIT
rootfs="$work/rootfs"

MIRROR="$(mirror)"
log "debootstrap bookworm from $MIRROR (about a minute)"
debootstrap --variant=minbase --include="$INCLUDE" bookworm "$rootfs" "$MIRROR" >"$work/debootstrap.log" 2>&1 \
  || { tail -n 20 "$work/debootstrap.log" >&2; exit 1; }

# No sources and no lists: scenarios add the fixture repo only. An empty machine-id lets systemd
# make a fresh one per container.
: >"$rootfs/etc/apt/sources.list"
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/archives/*.deb
: >"$rootfs/etc/machine-id"
# Units that only make noise or hang in a container without hardware. (systemd-logind stays:
# ansible.builtin.reboot's default command schedules the shutdown through it.)
for unit in systemd-remount-fs.service getty.target console-getty.service \
  apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer; do
  ln -sf /dev/null "$rootfs/etc/systemd/system/$unit"
done

import() {
  local old
  old="$(podman image inspect --format '{{.Id}}' "$1" 2>/dev/null || true)"
  tar -C "$rootfs" -c . | podman import --quiet --change 'CMD ["/sbin/init"]' \
    --change 'STOPSIGNAL SIGRTMIN+3' - "$1" >/dev/null
  # A rebuild leaves the previous image untagged: remove ours (never anyone else's).
  if [ -n "$old" ]; then podman rmi "$old" >/dev/null 2>&1 || true; fi
  log "built $1"
}

import "$BOOKWORM"

# Derive the bionic-identity image from the same rootfs: only the identity files differ.
# /etc/os-release is a symlink into /usr/lib on Debian: replace both. The word "Debian" must not
# appear in os-release, or Ansible's distribution detection says Debian.
rm -f "$rootfs/etc/os-release" "$rootfs/usr/lib/os-release"
cat >"$rootfs/usr/lib/os-release" <<'OSR'
NAME="Ubuntu"
VERSION="18.04.6 LTS (Bionic Beaver)"
ID=ubuntu
ID_LIKE=debian
PRETTY_NAME="Ubuntu 18.04.6 LTS"
VERSION_ID="18.04"
VERSION_CODENAME=bionic
UBUNTU_CODENAME=bionic
OSR
ln -s ../usr/lib/os-release "$rootfs/etc/os-release"
cat >"$rootfs/etc/lsb-release" <<'LSB'
DISTRIB_ID=Ubuntu
DISTRIB_RELEASE=18.04
DISTRIB_CODENAME=bionic
DISTRIB_DESCRIPTION="Ubuntu 18.04.6 LTS"
LSB
printf 'buster/sid\n' >"$rootfs/etc/debian_version"
printf 'gpufix test image: Debian 12 userland with an Ubuntu 18.04 identity\n' \
  >"$rootfs/etc/gpufix-test-image"
import "$BIONIC"
