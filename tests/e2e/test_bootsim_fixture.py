"""The lab's simulated boot (tests/fixtures/aptrepo/specs/bootsim.yml) decides once per boot.

After a container restart the systemd unit and the first `gpufix-bootsim-uname` (a play that
resumed early in the boot) can both decide, and a decision consumes GRUB's one-shot entry: the
second used to see it gone and "boot" the saved default, so the lab booted two kernels at once.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import containers
import pytest
import yaml
from lab import IMAGE, ROOT

SPEC = ROOT / "tests" / "fixtures" / "aptrepo" / "specs" / "bootsim.yml"
TOOLS = {
    "/usr/local/sbin/gpufix-bootsim-boot": "boot",
    "/usr/local/sbin/gpufix-bootsim-env": "env",
    "/usr/local/bin/gpufix-bootsim-uname": "uname",
}
# One boot with a one-shot entry for the new kernel and the old one saved as the default; then
# the unit (boot --once) and three early unames at the same time, 25 boots over.
RACE = r"""set -e
install -m 0755 /fx/boot /usr/local/sbin/gpufix-bootsim-boot
install -m 0755 /fx/env /usr/local/sbin/gpufix-bootsim-env
install -m 0755 /fx/uname /usr/local/bin/gpufix-bootsim-uname
mkdir -p /boot /var/lib/gpufix-bootsim
touch /boot/vmlinuz-4.15.0-213-generic /boot/vmlinuz-5.4.0-150-generic
echo GRUB_DEFAULT=saved >/var/lib/gpufix-bootsim/grub.cfg
old="Advanced options for Ubuntu>Ubuntu, with Linux 4.15.0-213-generic"
new="Advanced options for Ubuntu>Ubuntu, with Linux 5.4.0-150-generic"
printf '%s\n' "$old" "$new" >/var/lib/gpufix-bootsim/entries  # the menu's entries (update-grub)
for i in $(seq 25); do
  rm -rf /run/gpufix-bootsim
  gpufix-bootsim-env set saved_entry "$old"
  gpufix-bootsim-env set next_entry "$new"
  gpufix-bootsim-boot --once >/tmp/o.0 & gpufix-bootsim-uname >/tmp/o.1 &
  gpufix-bootsim-uname >/tmp/o.2 & gpufix-bootsim-uname >/tmp/o.3 &
  wait
  echo "boot $i: $(cat /tmp/o.0 /tmp/o.1 /tmp/o.2 /tmp/o.3 | sort | uniq -c | tr -s ' \n' ' ')"
  echo "file $i: $(cat /run/gpufix-bootsim/kernel)"
done
"""


def _tools(tmp: Path) -> Path:
    files = yaml.safe_load(SPEC.read_text())["packages"][0]["files"]
    for path, name in TOOLS.items():
        (tmp / name).write_text(files[path]["content"])
    return tmp


@pytest.mark.integration
def test_one_decision_per_boot_when_the_unit_and_uname_race(tmp_path: Path) -> None:
    if subprocess.run(["podman", "image", "exists", IMAGE], capture_output=True).returncode:
        containers.unavailable(f"{IMAGE} missing: run tests/images/build.sh")
    r = subprocess.run(
        [
            "podman",
            "run",
            "--rm",
            "--runtime=runc",
            "--network=none",
            "--ulimit=nofile=16384:16384",
            "--ulimit=nproc=16384:16384",
            "-v",
            f"{_tools(tmp_path)}:/fx:ro",
            IMAGE,
            "sh",
            "-c",
            RACE,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.splitlines()
    assert len(lines) == 50, r.stdout
    for line in lines:
        # every asker got the one-shot kernel, and the file the python hook reads says the same
        assert line.split(": ", 1)[1].strip() in ("4 5.4.0-150-generic", "5.4.0-150-generic"), line
