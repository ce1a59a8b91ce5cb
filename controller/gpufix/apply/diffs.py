"""What `apply --check` shows per host: the file diffs and package changes Ansible's
`--check --diff` reported, as plain unified-diff lines (control characters escaped: file
contents come from the host)."""

from __future__ import annotations

import difflib
import json
from typing import Any

MAX_LINES = 400  # per host; the JSON output keeps everything


def printable(line: str) -> str:
    return "".join(c if c.isprintable() or c == "\t" else repr(c)[1:-1] for c in line)


def _one(task: str, item: dict[str, Any]) -> list[str]:
    if "prepared" in item:  # apt, dpkg_selections: what the package manager would do
        return [f"# {task}", *str(item["prepared"]).splitlines()]
    before, after = item.get("before", ""), item.get("after", "")
    if isinstance(before, str) and isinstance(after, str):
        return list(
            difflib.unified_diff(
                before.splitlines(),
                after.splitlines(),
                fromfile=str(item.get("before_header") or task),
                tofile=str(item.get("after_header") or task),
                lineterm="",
            )
        )
    # state changes (file: absent -> directory, ...)
    return [
        f"# {task}",
        f"- {json.dumps(before, sort_keys=True, default=str)}",
        f"+ {json.dumps(after, sort_keys=True, default=str)}",
    ]


def diff_lines(diffs: list[dict[str, Any]] | tuple[dict[str, Any], ...]) -> list[str]:
    """Unified-diff lines for a host's [{"task", "diff"}] records, at most MAX_LINES."""
    lines: list[str] = []
    for d in diffs:
        raw = d.get("diff")
        items = raw if isinstance(raw, list) else [raw]
        for item in items:
            if isinstance(item, dict):
                lines += _one(str(d.get("task") or "task"), item)
    if len(lines) > MAX_LINES:
        lines = [*lines[:MAX_LINES], f"... {len(lines) - MAX_LINES} more lines (see --json)"]
    return [printable(x) for x in lines]
