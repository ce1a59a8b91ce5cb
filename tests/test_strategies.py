"""Each strategy is one record; what apply knows about it must match what its roles do."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from gpufix import strategies
from gpufix.paths import content_root

ROOT = content_root()
# Paths a role writes that rollback does not restore, and why.
NOT_WATCHED = {
    "/etc/nccl.conf.gpufix-orig": "the nccl_profile role's own backup of /etc/nccl.conf",
    "/usr/local/lib/gpufix": "the probe's install folder (removed by playbooks/uninstall.yml)",
}
# Paths in a role's defaults that the role only reads (another role writes them).
READ_ONLY = {
    ("container_runtime", "/etc/nccl.conf"): "gpufix-run reads the profile nccl_profile writes",
}
_PATH = re.compile(r"^/(etc|usr/local)/[\w./-]+$")


def _roles(playbook: str) -> set[str]:
    plays = yaml.safe_load((ROOT / "playbooks" / playbook).read_text())
    names: set[str] = set()
    for play in plays:
        for r in play.get("roles") or []:
            names.add(r["role"] if isinstance(r, dict) else r)
        for task in (play.get("tasks") or []) + (play.get("pre_tasks") or []):
            for key in ("ansible.builtin.include_role", "ansible.builtin.import_role"):
                if key in task:
                    names.add(task[key]["name"])
    return {n.split(".")[-1] for n in names}


def _role_text(role: str) -> str:
    base = ROOT / "roles" / role
    parts = [
        p.read_text() for p in sorted(base.rglob("*")) if p.is_file() and "meta" not in p.parts
    ]
    return "\n".join(parts)


def _default_paths(role: str) -> set[str]:
    """Plain file paths in a role's defaults and vars: what it writes unless told otherwise."""
    out: set[str] = set()
    for f in ("defaults/main.yml", "vars/main.yml"):
        path = ROOT / "roles" / role / f
        data = yaml.safe_load(path.read_text()) if path.is_file() else None
        for value in (data or {}).values():
            if isinstance(value, str) and _PATH.match(value):
                out.add(value)
    return out


ACTIVE = [s for s in strategies.REGISTRY.values() if s.playbook]


def test_registry_names_are_unique_and_complete() -> None:
    assert strategies.NAMES[0] == "none"
    assert len(set(strategies.NAMES)) == len(strategies.NAMES)
    assert all(s.name == n for n, s in strategies.REGISTRY.items())


@pytest.mark.parametrize("s", ACTIVE, ids=[s.name for s in ACTIVE])
def test_playbook_exists_and_uses_roles(s: strategies.Strategy) -> None:
    assert s.playbook and (ROOT / "playbooks" / s.playbook).is_file()
    assert _roles(s.playbook), f"{s.playbook} runs no role"


@pytest.mark.parametrize("s", ACTIVE, ids=[s.name for s in ACTIVE])
def test_every_watched_file_is_one_its_roles_write(s: strategies.Strategy) -> None:
    assert s.playbook
    text = "\n".join(_role_text(r) for r in _roles(s.playbook))
    for f in s.watched_files:
        assert f in text or Path(f).name in text, f"{s.name}: no role of {s.playbook} writes {f}"


@pytest.mark.parametrize("s", ACTIVE, ids=[s.name for s in ACTIVE])
def test_every_file_its_roles_write_is_watched(s: strategies.Strategy) -> None:
    assert s.playbook
    for role in _roles(s.playbook):
        read_only = {path for (who, path) in READ_ONLY if who == role}
        for f in _default_paths(role) - set(NOT_WATCHED) - read_only:
            assert any(f == w or w.startswith(f + "/") for w in s.watched_files) or any(
                f.startswith(w.rstrip("/") + "/") for w in s.watched_files
            ), f"{s.name}: role {role} writes {f}, which rollback would not restore"
