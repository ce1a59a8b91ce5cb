"""Where the Ansible content (ansible.cfg, library/, roles/, playbooks/, inventory/) lives."""

from __future__ import annotations

import os
from pathlib import Path

from gpufix.errors import GpufixError


def project_root() -> Path:
    """The gpufix checkout: $GPUFIX_HOME, else the tree this package was installed from."""
    env = os.environ.get("GPUFIX_HOME")
    candidates = [Path(env)] if env else []
    candidates.append(Path(__file__).resolve().parents[2])
    for c in candidates:
        if (c / "ansible.cfg").is_file() and (c / "library").is_dir():
            return c
    raise GpufixError(
        "cannot find the gpufix checkout (ansible.cfg, library/): set GPUFIX_HOME to it"
    )


def default_inventory() -> Path:
    return project_root() / "inventory" / "example.yml"


def state_dir() -> Path:
    """Journals and run data; created 0700 because runs may name hosts and users."""
    base = os.environ.get("GPUFIX_STATE_DIR")
    path = Path(base) if base else Path.home() / ".local" / "state" / "gpufix"
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path, 0o700)
    return path
