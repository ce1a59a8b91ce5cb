"""Where gpufix's Ansible content and its state live.

The Ansible content (ansible.cfg, roles/, playbooks/, plugins/modules/, inventory/) is the
repository root of a checkout, which is also the `gpufix.fleet` collection. A wheel carries the
same files as package data under `gpufix/_content/`. `GPUFIX_HOME` overrides both.
"""

from __future__ import annotations

import os
from pathlib import Path

from gpufix.errors import GpufixError

_MARKERS = ("ansible.cfg", "playbooks", "roles", "plugins/modules/gpufix_facts.py")
_PACKAGE = Path(__file__).resolve().parent


def _is_content(path: Path) -> bool:
    return all((path / m).exists() for m in _MARKERS)


def content_root() -> Path:
    """$GPUFIX_HOME, else the content shipped in the wheel, else the checkout this runs from."""
    env = os.environ.get("GPUFIX_HOME")
    if env:
        if _is_content(Path(env)):
            return Path(env).resolve()
        raise GpufixError(
            f"GPUFIX_HOME={env} holds no gpufix content (ansible.cfg, playbooks/, roles/, plugins/)"
        )
    for candidate in (_PACKAGE / "_content", _PACKAGE.parents[1]):
        if _is_content(candidate):
            return candidate
    raise GpufixError(
        "this gpufix install has no Ansible content (roles, playbooks): reinstall the wheel, "
        "or set GPUFIX_HOME to a checkout"
    )


def playbook(name: str) -> Path:
    return content_root() / "playbooks" / name


def facts_module() -> Path:
    return content_root() / "plugins" / "modules" / "gpufix_facts.py"


def probe_program() -> Path:
    """The probe program, shipped to hosts by roles/probe and run locally by `gpufix probe`."""
    return content_root() / "roles" / "probe" / "files" / "gpufix_probe.py"


def default_inventory() -> Path:
    return content_root() / "inventory" / "example.yml"


def state_dir() -> Path:
    """Journals and run data; created 0700 because runs may name hosts and users."""
    base = os.environ.get("GPUFIX_STATE_DIR")
    path = Path(base) if base else Path.home() / ".local" / "state" / "gpufix"
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path, 0o700)
    return path
