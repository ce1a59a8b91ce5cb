"""The facts snapshot: what gpufix_facts returned for one host, loaded, validated and saved."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema

from gpufix import schema_check
from gpufix.errors import InvalidInput

FORMAT = "gpufix-facts"
VERSION = 1
_MAX_MESSAGE = 200


@dataclass(frozen=True)
class Snapshot:
    """One host's facts at one time; `facts` is the module's ansible_facts.gpufix."""

    host: str
    gathered_at: str
    facts: Mapping[str, Any] = field(hash=False)

    def to_doc(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": VERSION,
            "host": self.host,
            "gathered_at": self.gathered_at,
            "facts": dict(self.facts),
        }


@cache
def schema() -> dict[str, Any]:
    text = resources.files("gpufix").joinpath("schemas/facts.schema.json").read_text("utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def _validator() -> jsonschema.Draft202012Validator:
    return schema_check.validator(schema())


def _one_line(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MAX_MESSAGE else text[: _MAX_MESSAGE - 3] + "..."


def schema_errors(doc: object) -> list[str]:
    """Every schema violation as 'path: message', the most relevant first; [] when valid."""
    errors = list(_validator().iter_errors(doc))
    if not errors:
        return []
    return [_one_line(text) for text in schema_check.described(errors, _message)]


def _message(err: Any) -> str:
    """jsonschema's message, with a large value it starts with replaced by its size: "facts/gpus:
    a list of 129 items is too long", not the first 200 characters of the list."""
    shown = repr(err.instance)
    if len(shown) <= 80 or not err.message.startswith(shown):
        return str(err.message)
    inst = err.instance
    if isinstance(inst, list):
        what = f"a list of {len(inst)} items"
    elif isinstance(inst, dict):
        what = f"an object of {len(inst)} keys"
    else:
        what = f"a {type(inst).__name__} of {len(shown)} characters"
    return what + str(err.message)[len(shown) :]


def validate(doc: object) -> None:
    """Raise InvalidInput with the first problem when doc is not a valid snapshot document."""
    if not isinstance(doc, dict):
        raise InvalidInput("not a gpufix facts snapshot: expected a JSON object")
    if doc.get("format") != FORMAT:
        raise InvalidInput(
            f"not a gpufix facts snapshot: format is {doc.get('format')!r}, expected {FORMAT!r}"
        )
    if doc.get("version") != VERSION:
        raise InvalidInput(
            f"unsupported gpufix facts snapshot version {doc.get('version')!r}"
            f" (this gpufix reads version {VERSION})"
        )
    problems = schema_errors(doc)
    if problems:
        raise InvalidInput("invalid gpufix facts snapshot: " + problems[0])


def load_snapshot(path: str | os.PathLike[str]) -> Snapshot:
    """Read and validate a snapshot file through the input layer (regular file, size cap, depth
    and number limits); every failure is one InvalidInput line naming the file and the field."""
    from gpufix import inputs

    p = Path(path)
    doc = inputs.load_json(p, "facts")
    try:
        validate(doc)
    except InvalidInput as exc:
        raise InvalidInput(f"facts file {inputs.one_line(str(p))}: {exc}") from None
    return Snapshot(host=doc["host"], gathered_at=doc["gathered_at"], facts=doc["facts"])


def save_snapshot(snap: Snapshot, path: str | os.PathLike[str]) -> None:
    """Validate and write atomically (a reader never sees half a file; no temp file is left)."""
    from gpufix.engine.plan import write_atomic

    doc = snap.to_doc()
    validate(doc)
    write_atomic(Path(path), json.dumps(doc, indent=2, sort_keys=True) + "\n", what="facts file")


def now_utc() -> str:
    return datetime.now(timezone.utc).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


def from_module_result(host: str, ansible_facts: Mapping[str, Any]) -> Snapshot:
    """Snapshot from a module result's ansible_facts (or its `gpufix` dict itself). What a host
    reports is data from outside: bounded in depth and size, then validated like a file."""
    from gpufix import inputs

    facts = (
        ansible_facts.get("gpufix", ansible_facts) if isinstance(ansible_facts, Mapping) else None
    )
    if not isinstance(facts, Mapping):
        raise InvalidInput(f"host {host}: the facts module returned no gpufix facts")
    inputs.check_tree(facts, f"facts from host {host}")
    snap = Snapshot(host=host, gathered_at=now_utc(), facts=dict(facts))
    try:
        validate(snap.to_doc())
    except InvalidInput as exc:
        raise InvalidInput(f"host {host}: {exc}") from None
    return snap


def is_unknown(value: object) -> bool:
    """True for the module's {"unknown": "<reason>"} marker."""
    return isinstance(value, Mapping) and len(value) == 1 and "unknown" in value


def unknown_reason(value: object) -> str | None:
    return str(value["unknown"]) if is_unknown(value) else None  # type: ignore[index]


def known(value: Any, default: Any = None) -> Any:
    """value, or default when it is unknown."""
    return default if is_unknown(value) else value


_MISSING = object()


def get(facts: Mapping[str, Any] | Snapshot, path: str, default: Any = None) -> Any:
    """Dotted-path lookup ('driver.kernel_module', 'gpus.0.name'); default when any step is
    missing or unknown. A known null is returned as None."""
    node: Any = facts.facts if isinstance(facts, Snapshot) else facts
    for part in path.split("."):
        if is_unknown(node):
            return default
        if isinstance(node, Mapping):
            node = node.get(part, _MISSING)
        elif isinstance(node, list) and part.lstrip("-").isdigit():
            idx = int(part)
            node = node[idx] if -len(node) <= idx < len(node) else _MISSING
        else:
            return default
        if node is _MISSING:
            return default
    return default if is_unknown(node) else node
