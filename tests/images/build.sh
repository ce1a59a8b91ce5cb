#!/usr/bin/env bash
# Build the systemd container images the molecule scenarios run in, without a registry.
#
# Tag 2, "bare": as little as a minimal Ubuntu server has, so a role that relies on a helper it
# never installs fails here as it would on a real host.
#   localhost/gpufix-bookworm:2            Debian 12 (bookworm) minbase + the packages below
#   localhost/gpufix-RELEASE-identity:2    the SAME Debian userland whose /etc/os-release and
#                                          /etc/lsb-release say Ubuntu RELEASE (bionic, focal,
#                                          jammy, noble). They exercise our roles' Ubuntu code
#                                          paths with Ubuntu's package names, not Ubuntu itself
#                                          (apt, glibc and Python are Debian 12's).
# Tag 1, "helpers" (legacy): bookworm and bionic-identity with python3-debian, python3-venv,
#   pciutils, gnupg and ca-certificates pre-installed; kept while the scenarios of other roles
#   still name it. New scenarios use tag 2.
# Images that already exist are reused; FORCE=1 rebuilds them; GPUFIX_IMAGE_TAGS="2" builds one set.
set -euo pipefail

# What the bare images have on top of debootstrap's minbase, and why:
#   python3, python3-apt  Ansible needs a Python on the target at all, and its apt module needs
#                         python3-apt; offline it could not install it itself. Ubuntu server
#                         images have both (python3 is in ubuntu-minimal, python3-apt comes with
#                         ubuntu-server's tools).
#   systemd, systemd-sysv the scenarios boot the container like a host (PID 1 = systemd).
#   dbus                  systemd-logind and ansible.builtin.reboot need it, as on a real host.
#   kmod, procps, apt-utils  in ubuntu-minimal (modprobe/modinfo, ps, debconf's apt helper).
# Not there, on purpose: python3-debian (deb822_repository), python3-venv, gnupg, ca-certificates,
# pciutils, curl. A role that needs one installs it from the apt sources it was given.
BARE="python3,python3-apt,systemd,systemd-sysv,dbus,kmod,procps,apt-utils"
HELPERS="$BARE,python3-debian,python3-venv,pciutils,ca-certificates,gnupg"
RELEASES_BARE="bionic focal jammy noble"
RELEASES_HELPERS="bionic"

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

import() {
  local rootfs="$1" name="$2" old
  old="$(podman image inspect --format '{{.Id}}' "$name" 2>/dev/null || true)"
  tar -C "$rootfs" -c . | podman import --quiet --change 'CMD ["/sbin/init"]' \
    --change 'STOPSIGNAL SIGRTMIN+3' - "$name" >/dev/null
  # A rebuild leaves the previous image untagged: remove ours (never anyone else's).
  if [ -n "$old" ]; then podman rmi "$old" >/dev/null 2>&1 || true; fi
  log "built $name"
}

# release -> "VERSION_ID|VERSION|debian_version" (Ubuntu's own /etc/os-release values).
identity_of() {
  case "$1" in
    bionic) echo '18.04|18.04.6 LTS (Bionic Beaver)|buster/sid' ;;
    focal) echo '20.04|20.04.6 LTS (Focal Fossa)|bullseye/sid' ;;
    jammy) echo '22.04|22.04.5 LTS (Jammy Jellyfish)|bookworm/sid' ;;
    noble) echo '24.04|24.04.3 LTS (Noble Numbat)|trixie/sid' ;;
    *) log "unknown release $1"; return 1 ;;
  esac
}

# Rewrite the identity files in place. /etc/os-release is a symlink into /usr/lib on Debian:
# replace both. The word "Debian" must not appear in os-release, or Ansible's distribution
# detection says Debian.
set_identity() {
  local rootfs="$1" release="$2" id version_id version debver
  id="$(identity_of "$release")"
  IFS='|' read -r version_id version debver <<<"$id"
  rm -f "$rootfs/etc/os-release" "$rootfs/usr/lib/os-release"
  cat >"$rootfs/usr/lib/os-release" <<OSR
NAME="Ubuntu"
VERSION="$version"
ID=ubuntu
ID_LIKE=debian
PRETTY_NAME="Ubuntu ${version% (*}"
VERSION_ID="$version_id"
VERSION_CODENAME=$release
UBUNTU_CODENAME=$release
OSR
  ln -s ../usr/lib/os-release "$rootfs/etc/os-release"
  cat >"$rootfs/etc/lsb-release" <<LSB
DISTRIB_ID=Ubuntu
DISTRIB_RELEASE=$version_id
DISTRIB_CODENAME=$release
DISTRIB_DESCRIPTION="Ubuntu ${version% (*}"
LSB
  printf '%s\n' "$debver" >"$rootfs/etc/debian_version"
  printf 'gpufix test image: Debian 12 userland with an Ubuntu %s identity\n' "$version_id" \
    >"$rootfs/etc/gpufix-test-image"
}

# build_set TAG PACKAGES RELEASES
build_set() {
  local tag="$1" include="$2" releases="$3" missing=0 release work rootfs
  exists "localhost/gpufix-bookworm:$tag" || missing=1
  for release in $releases; do
    exists "localhost/gpufix-$release-identity:$tag" || missing=1
  done
  if [ "$missing" = 0 ]; then
    log "images present: tag $tag (bookworm, $releases)"
    return 0
  fi
  for tool in podman debootstrap; do
    command -v "$tool" >/dev/null || { log "missing $tool: run scripts/setup-podman.sh"; exit 1; }
  done
  work="$(mktemp -d "${TMPDIR:-/var/tmp}/gpufix-rootfs.XXXXXX")"
  # shellcheck disable=SC2064  # expand now: the trap must remove this set's directory
  trap "rm -rf '$work'" RETURN
  rootfs="$work/rootfs"
  log "debootstrap bookworm (tag $tag) from $(mirror) (about a minute)"
  debootstrap --variant=minbase --include="$include" bookworm "$rootfs" "$(mirror)" \
    >"$work/debootstrap.log" 2>&1 || { tail -n 20 "$work/debootstrap.log" >&2; exit 1; }
  # No sources and no lists: scenarios add the fixture repositories only. An empty machine-id
  # lets systemd make a fresh one per container.
  : >"$rootfs/etc/apt/sources.list"
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/archives/*.deb
  : >"$rootfs/etc/machine-id"
  # Units that only make noise or hang in a container without hardware. (systemd-logind stays:
  # ansible.builtin.reboot's default command schedules the shutdown through it.)
  for unit in systemd-remount-fs.service getty.target console-getty.service \
    apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer; do
    ln -sf /dev/null "$rootfs/etc/systemd/system/$unit"
  done
  import "$rootfs" "localhost/gpufix-bookworm:$tag"
  for release in $releases; do
    set_identity "$rootfs" "$release"
    import "$rootfs" "localhost/gpufix-$release-identity:$tag"
  done
}

for tag in ${GPUFIX_IMAGE_TAGS:-2 1}; do
  case "$tag" in
    2) build_set 2 "$BARE" "$RELEASES_BARE" ;;
    1) build_set 1 "$HELPERS" "$RELEASES_HELPERS" ;;
    *) log "unknown image tag $tag (2 = bare, 1 = with helpers)"; exit 3 ;;
  esac
done
