"""Which installed packages playbooks/host_check.yml records: what a strategy's roles install, so
rollback (gpufix.apply.rollback) can remove what a change added. Runs the playbook's own script
with stub dpkg-query, dpkg and apt-mark first on PATH, printing a recorded bionic host."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent

# dpkg-query -W -f '${Package}\t${Version}\t${db:Status-Abbrev}\n' on a bionic host after a
# DKMS driver install (dkms and pciutils as the driver and pcie_acs roles pull them in).
ROWS = [
    ("bash", "4.4.18-2ubuntu1.3", "ii"),
    ("dkms", "2.3-3ubuntu9.7", "ii"),
    ("libpci3", "1:3.5.2-1ubuntu1.1", "ii"),
    ("pciutils", "1:3.5.2-1ubuntu1.1", "ii"),
    ("nvidia-dkms-535", "535.183.01-0ubuntu0.18.04.1", "ii"),
    ("nvidia-driver-535", "535.183.01-0ubuntu0.18.04.1", "hi"),
    ("linux-headers-5.4.0-150-generic", "5.4.0-150.167~18.04.1", "ii"),
    ("dkms-helper", "1.0", "ii"),
    ("xpciutils", "1.0", "ii"),
    ("old-removed", "1.0", "rc"),
]
# ${db:Status-Abbrev} is three characters: the third (error flag) is a space when all is well.
DPKG_QUERY = "".join(f"{name}\t{version}\t{status} \n" for name, version, status in ROWS)


def _script() -> str:
    plays = yaml.safe_load((ROOT / "playbooks" / "host_check.yml").read_text())
    script: str = plays[0]["vars"]["__gpufix_preflight_script"]
    return script


def _stub(bindir: Path, name: str, body: str) -> None:
    path = bindir / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)


def test_the_packages_a_change_can_add_are_recorded(tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (tmp_path / "dpkg-query.out").write_text(DPKG_QUERY)
    _stub(bindir, "dpkg-query", f"cat '{tmp_path}/dpkg-query.out'\n")
    _stub(bindir, "dpkg", "exit 0\n")
    _stub(bindir, "apt-mark", "echo nvidia-driver-535\n")
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}"}
    out = subprocess.run(
        [sys.executable, "-c", _script(), "0", "[]", "echo 5.4.0-150-generic"],
        capture_output=True, text=True, env=env, timeout=60, check=True,
    )  # fmt: skip
    report = json.loads(out.stdout)
    assert sorted(report["packages"]) == [
        "dkms",
        "linux-headers-5.4.0-150-generic",
        "nvidia-dkms-535",
        "nvidia-driver-535",
        "pciutils",
    ]
    assert report["holds"] == ["nvidia-driver-535"]
