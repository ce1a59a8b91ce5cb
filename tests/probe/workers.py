"""Live probe workers left behind by a test run (shared by tests/probe and tests/test_probe.py)."""

from __future__ import annotations

import os
from pathlib import Path


def leftovers(token: str) -> list[int]:
    """PIDs of live probe workers whose command line mentions token (zombies are dead)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if token in cmdline and "--worker" in cmdline and state != "Z":
            found.append(int(entry))
    return found
