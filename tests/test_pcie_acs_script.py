"""roles/pcie_acs/files/gpufix-pcie-acs against a fake setpci: what NCCL's troubleshooting guide
does ("PCI Access Control Services"): only bridges with the ACS capability, value read back."""

from __future__ import annotations

import subprocess
from pathlib import Path

from test_pcie_acs_finder import device

FILES = Path(__file__).resolve().parents[1] / "roles" / "pcie_acs" / "files"
SCRIPT = FILES / "gpufix-pcie-acs"
REG, WANT = "ECAP_ACS+0x6.w", "0000"

# A stand-in for setpci over a directory of registers, one file per bridge that has ACS: a read
# of a bridge without the file fails as setpci does ("Extended capability 000d not found"); a
# file named BDF.stuck ignores writes (a bridge that keeps its ACS bits). With a file named
# "locked" beside regs/ it is pciutils 3.5.2 under kernel lockdown: the kernel refuses the write
# (EPERM), lib/sysfs.c only warns and setpci.c ignores the result, so it exits 0.
FAKE_SETPCI = r"""#!/bin/sh
d=$(dirname "$0")/regs
[ "$1" = -s ] || exit 2
bdf=$2 op=$3
echo "$*" >>"$d/../calls"
if [ ! -e "$d/$bdf" ]; then
  echo "setpci: $bdf: Instance #0 of Extended capability 000d not found" >&2
  exit 1
fi
case "$op" in
  *=*)
    if [ -e "$d/../locked" ]; then
      echo "pcilib: sysfs_write: write failed: Operation not permitted" >&2
    elif [ ! -e "$d/$bdf.stuck" ]; then
      echo "${op#*=}" >"$d/$bdf"
    fi ;;
  *) cat "$d/$bdf" ;;
esac
"""


def fake_setpci(
    tmp: Path, acs: dict[str, str], stuck: tuple[str, ...] = (), locked: bool = False
) -> Path:
    (tmp / "regs").mkdir()
    if locked:
        (tmp / "locked").write_text("")
    for bdf, value in acs.items():
        (tmp / "regs" / bdf).write_text(value + "\n")
    for bdf in stuck:
        (tmp / "regs" / f"{bdf}.stuck").write_text("")
    tool = tmp / "setpci"
    tool.write_text(FAKE_SETPCI)
    tool.chmod(0o755)
    return tool


def run(tmp: Path, *bridges: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["sh", str(SCRIPT), str(tmp / "setpci"), REG, WANT, *bridges],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
    )


def test_clears_bridges_with_acs_and_skips_the_rest(tmp_path: Path) -> None:
    fake_setpci(tmp_path, {"0000:02:08.0": "001d", "0000:02:10.0": "005f"})
    r = run(tmp_path, "0000:00:01.0", "0000:02:08.0", "0000:02:10.0")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "regs" / "0000:02:08.0").read_text().strip() == "0000"
    assert (tmp_path / "regs" / "0000:02:10.0").read_text().strip() == "0000"
    assert "0000:00:01.0 has no ACS capability: skipped" in r.stdout
    # never a write to the bridge without ACS
    calls = (tmp_path / "calls").read_text().splitlines()
    assert [c for c in calls if c.startswith("-s 0000:00:01.0") and "=" in c] == []
    assert calls.count(f"-s 0000:02:08.0 {REG}") == 2  # capability check and read-back


def test_a_bridge_that_does_not_read_back_0000_fails_the_run(tmp_path: Path) -> None:
    fake_setpci(tmp_path, {"0000:02:08.0": "001d", "0000:02:10.0": "001d"}, stuck=("0000:02:08.0",))
    r = run(tmp_path, "0000:02:08.0", "0000:02:10.0")
    assert r.returncode == 1
    assert "0000:02:08.0: ECAP_ACS+0x6.w reads '001d' after writing 0000" in r.stderr
    # the other bridge is still done
    assert (tmp_path / "regs" / "0000:02:10.0").read_text().strip() == "0000"


def test_auto_touches_only_the_bridges_above_gpus_that_have_acs(tmp_path: Path) -> None:
    sys_root = tmp_path / "sys"
    sw = "pci0000:00/0000:00:01.0/0000:01:00.0"  # root port (no ACS here), switch upstream port
    device(sys_root, f"{sw}/0000:02:08.0/0000:03:00.0", "0x10de", "0x030200")
    device(sys_root, f"{sw}/0000:02:10.0/0000:04:00.0", "0x10de", "0x030200")
    device(sys_root, "pci0000:80/0000:80:01.0/0000:81:00.0", "0x15b3", "0x020000")  # a NIC
    tool_dir = tmp_path / "bin"
    tool_dir.mkdir()
    fake_setpci(tool_dir, {"0000:02:08.0": "001d", "0000:02:10.0": "001d", "0000:80:01.0": "001d"})
    # the script finds gpufix-acs-bridges next to itself
    for name in ("gpufix-pcie-acs", "gpufix-acs-bridges"):
        (tool_dir / name).write_text((FILES / name).read_text())
        (tool_dir / name).chmod(0o755)
    r = subprocess.run(
        [str(tool_dir / "gpufix-pcie-acs"), str(tool_dir / "setpci"), REG, WANT, "auto"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "GPUFIX_ACS_SYSFS": str(sys_root)},
        timeout=30,
    )
    assert r.returncode == 0, r.stderr
    regs = {p.name: p.read_text().strip() for p in (tool_dir / "regs").iterdir()}
    assert regs == {"0000:02:08.0": "0000", "0000:02:10.0": "0000", "0000:80:01.0": "001d"}
    assert "0000:00:01.0 has no ACS capability: skipped" in r.stdout
    assert "0000:01:00.0 has no ACS capability: skipped" in r.stdout


def test_bad_usage_exits_2(tmp_path: Path) -> None:
    r = subprocess.run(["sh", str(SCRIPT), "/usr/bin/setpci"], capture_output=True, text=True)
    assert r.returncode == 2 and "usage:" in r.stderr


def lockdown(tmp: Path, mode: str) -> dict[str, str]:
    """A sysfs root whose kernel/security/lockdown reads as the kernel prints it, and the
    environment that points the script at it."""
    f = tmp / "sys" / "kernel" / "security" / "lockdown"
    f.parent.mkdir(parents=True)
    f.write_text(mode + "\n")
    return {"PATH": "/usr/bin:/bin", "GPUFIX_ACS_SYSFS": str(tmp / "sys")}


def test_a_write_refused_under_lockdown_is_a_write_failure_that_names_lockdown(
    tmp_path: Path,
) -> None:
    """Secure Boot on Ubuntu's kernels: setpci warns and exits 0, the register keeps its bits.
    Before, the script read the old value back and blamed ACS ("ACS still on")."""
    fake_setpci(tmp_path, {"0000:02:08.0": "001d", "0000:02:10.0": "001d"}, locked=True)
    env = lockdown(tmp_path, "none [integrity] confidentiality")
    r = run(tmp_path, "0000:02:08.0", "0000:02:10.0", env=env)
    assert r.returncode == 1
    for bdf in ("0000:02:08.0", "0000:02:10.0"):
        line = next(x for x in r.stderr.splitlines() if x.startswith(f"gpufix-pcie-acs: {bdf}:"))
        assert f"writing {REG}={WANT} failed" in line
        assert "sysfs_write: write failed: Operation not permitted" in line
        assert "lockdown (integrity" in line and "Secure Boot" in line
        assert "BIOS/firmware" in line and "nccl-profile" in line
    assert "ACS still on" not in r.stderr
    # no read-back after a refused write: capability check and write only
    calls = (tmp_path / "calls").read_text().splitlines()
    assert calls.count(f"-s 0000:02:08.0 {REG}") == 1


def test_a_refused_write_without_lockdown_does_not_blame_it(tmp_path: Path) -> None:
    """The same warning with lockdown off (or no lockdown LSM): a write failure, no guess."""
    fake_setpci(tmp_path, {"0000:02:08.0": "001d"}, locked=True)
    for mode in ("[none] integrity confidentiality", None):
        env = (
            lockdown(tmp_path / "on", mode)
            if mode
            else {"PATH": "/usr/bin:/bin", "GPUFIX_ACS_SYSFS": str(tmp_path / "absent")}
        )
        r = run(tmp_path, "0000:02:08.0", env=env)
        assert r.returncode == 1
        assert f"0000:02:08.0: writing {REG}={WANT} failed: pcilib: sysfs_write" in r.stderr
        assert "lockdown" not in r.stderr and "ACS still on" not in r.stderr
