"""One task per file registers a given name. A second task that registers it overwrites the
first's result even when it is skipped (Ansible registers `{"skipped": true}`), so a later task
that reads the first one's `results` sees nothing: a review (2026-12-05) found rollback.yml's
package removal overwriting its file removal, and a rollback that deleted a daemon.json gpufix
had written never reloaded dockerd."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
FILES = sorted([*ROOT.glob("playbooks/*.yml"), *ROOT.glob("roles/*/tasks/*.yml"),
                *ROOT.glob("roles/*/handlers/*.yml")])  # fmt: skip


def _tasks(node: Any) -> Iterator[dict[str, Any]]:
    """Every task of a playbook or task file, blocks, plays and handlers included."""
    if isinstance(node, list):
        for item in node:
            yield from _tasks(item)
    elif isinstance(node, dict):
        if "register" in node:
            yield node
        for key in ("tasks", "pre_tasks", "post_tasks", "handlers", "block", "rescue", "always"):
            yield from _tasks(node.get(key))


def test_the_files_are_found() -> None:
    assert len(FILES) > 20 and any(f.name == "rollback.yml" for f in FILES)


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_name_is_registered_by_one_task(path: Path) -> None:
    names = Counter(t["register"] for t in _tasks(yaml.safe_load(path.read_text())))
    assert [n for n, k in names.items() if k > 1] == []


def test_the_check_sees_a_second_register() -> None:
    doc = [{"tasks": [{"name": "a", "register": "r"}, {"block": [{"name": "b", "register": "r"}]}]}]
    assert Counter(t["register"] for t in _tasks(doc)) == {"r": 2}
