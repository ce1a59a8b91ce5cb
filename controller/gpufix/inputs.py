"""The one door for every file gpufix reads (snapshots, verdicts, plans, journals, sources):
regular files only, a size cap, bounded JSON depth, count and numbers, schema validation, and a
one-line error that names the file and the field.

Data that arrives from a host rather than a file (facts, probe verdicts in Ansible events) goes
through `check_tree` and `validate` too.
"""

from __future__ import annotations

import json
import math
import os
import stat
from collections.abc import Callable
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema

from gpufix import schema_check
from gpufix.errors import InvalidInput

MiB = 1024 * 1024
# Caps, by kind. A facts snapshot of an 8-GPU host is ~40 KiB; a plan file of 100 hosts with
# their facts a few MiB. A cap is a guard against /dev/zero and mistakes, not a budget.
MAX_BYTES = {
    "facts": 16 * MiB,
    "verdict": 16 * MiB,
    "plan": 64 * MiB,
    "journal": 64 * MiB,
    "source": 4 * MiB,
    "text": 4 * MiB,
}
MAX_DEPTH = 48  # facts nest ~6 deep; a plan wraps them in ~4 more levels
MAX_NODES = 2_000_000  # JSON values in one document
MAX_INT_DIGITS = 30  # larger integers are never data gpufix uses
MAX_MESSAGE = 200


def printable(text: object) -> str:
    """Control, C1 and reordering characters (ESC, OSC's BEL, U+009B, U+202E) shown as escapes:
    a value from a host or a file must not drive the operator's terminal."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))


def one_line(text: str, limit: int = MAX_MESSAGE) -> str:
    """Whitespace (newlines, tabs) collapsed; long text cut; control characters shown escaped."""
    s = printable(" ".join(str(text).split()))
    return s if len(s) <= limit else s[: limit - 3] + "..."


def read_bytes(path: str | os.PathLike[str], what: str, *, max_bytes: int | None = None) -> bytes:
    """The bytes of a regular file, at most max_bytes; FIFOs, devices and directories refused
    without blocking (the file is opened non-blocking and checked with fstat)."""
    cap = max_bytes if max_bytes is not None else MAX_BYTES.get(what, MAX_BYTES["text"])
    p = Path(path)
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise InvalidInput(f"cannot read {what} file {one_line(str(p))}: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InvalidInput(
                f"{what} file {one_line(str(p))} is not a regular file ({_kind(st.st_mode)})"
            )
        if st.st_size > cap:
            raise InvalidInput(
                f"{what} file {one_line(str(p))} is too large ({st.st_size} bytes, limit {cap})"
            )
        chunks, total = [], 0
        while total <= cap:
            chunk = os.read(fd, min(1 * MiB, cap + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > cap:
            raise InvalidInput(f"{what} file {one_line(str(p))} grew past the limit ({cap} bytes)")
        return b"".join(chunks)
    except OSError as exc:
        raise InvalidInput(f"cannot read {what} file {one_line(str(p))}: {exc.strerror}") from None
    finally:
        os.close(fd)


def read_prefix(path: str | os.PathLike[str], max_bytes: int) -> bytes | None:
    """The first max_bytes of a regular file, or None where there is no readable regular file
    (a FIFO, a device, /proc/kmsg, a directory, a permission error): for files read as hints,
    where a refusal is no error. Opened non-blocking and checked with fstat, like read_bytes."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks, total = [], 0
        while total < max_bytes:
            chunk = os.read(fd, min(1 * MiB, max_bytes - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a plain file"


def read_text(path: str | os.PathLike[str], what: str, *, max_bytes: int | None = None) -> str:
    data = read_bytes(path, what, max_bytes=max_bytes)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(
            f"{what} file {one_line(str(path))} is not UTF-8 text (byte {exc.start})"
        ) from None


def _parse_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"an integer of {len(text)} digits")
    return int(text)


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:20]} out of range")
    return value


def _parse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object that names a key twice is refused: a reader sees the first value, json.loads
    would keep the last."""
    doc = dict(pairs)
    if len(doc) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"key {one_line(repr(key), 80)} appears twice in one object")
            seen.add(key)
    return doc


def parse_json(text: str, what: str, origin: str = "") -> Any:
    """json.loads with bounded numbers and nesting; every failure one InvalidInput line."""
    where = f"{what} {origin}".strip() if origin else what
    # Each comma outside a string separates two values: a document with more commas than the
    # value cap is refused before json.loads builds it (a 60 MB `[0,0,...]` took 2.4 GB).
    if text.count(",") > MAX_NODES:
        raise InvalidInput(f"{where} has too many values (limit {MAX_NODES})")
    try:
        doc = json.loads(
            text,
            parse_int=_parse_int,
            parse_float=_parse_float,
            parse_constant=_parse_constant,
            object_pairs_hook=_unique_keys,
        )
    except json.JSONDecodeError as exc:
        raise InvalidInput(
            f"{where} is not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        ) from None
    except RecursionError:
        raise InvalidInput(f"{where} is nested too deeply (limit {MAX_DEPTH})") from None
    except ValueError as exc:
        raise InvalidInput(f"{where} is not usable JSON: {one_line(str(exc))}") from None
    check_tree(doc, where)
    return doc


def check_tree(doc: Any, where: str, limit: int = MAX_DEPTH) -> None:
    """Refuse documents nested deeper than `limit` (MAX_DEPTH) or with more than MAX_NODES
    values (iterative: a deep document cannot exhaust the stack here)."""
    stack: list[tuple[Any, int]] = [(doc, 1)]
    nodes = 0
    while stack:
        node, depth = stack.pop()
        nodes += 1
        if depth > limit:
            raise InvalidInput(f"{where} is nested too deeply (limit {limit})")
        if nodes > MAX_NODES:
            raise InvalidInput(f"{where} has too many values (limit {MAX_NODES})")
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node)
        elif isinstance(node, int) and not isinstance(node, bool):
            if len(str(abs(node))) > MAX_INT_DIGITS:
                raise InvalidInput(f"{where} holds an integer that is too large")
        elif isinstance(node, float) and not math.isfinite(node):
            raise InvalidInput(f"{where} holds a number that is not finite")


@cache
def schema(name: str) -> dict[str, Any]:
    """A schema shipped in gpufix/schemas/ (name without the .schema.json suffix)."""
    text = resources.files("gpufix").joinpath(f"schemas/{name}.schema.json").read_text("utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


@cache
def _validator(name: str) -> jsonschema.Draft202012Validator:
    return schema_check.validator(schema(name))


def schema_errors(doc: Any, name: str) -> list[str]:
    """Every violation of schema `name` as 'field: message', the most relevant first."""
    errors = list(_validator(name).iter_errors(doc))
    if not errors:
        return []
    return [one_line(text) for text in schema_check.described(errors)]


def validate(doc: Any, name: str, where: str) -> None:
    """InvalidInput naming the first field that breaks schema `name`."""
    problems = schema_errors(doc, name)
    if problems:
        raise InvalidInput(f"{where}: {problems[0]}")


def load_json(
    path: str | os.PathLike[str],
    what: str,
    *,
    schema_name: str | None = None,
    check: Callable[[Any, str], None] | None = None,
    max_bytes: int | None = None,
) -> Any:
    """Read, parse and validate one JSON document: the only way gpufix loads a JSON file."""
    where = f"{what} file {one_line(str(path))}"
    doc = parse_json(read_text(path, what, max_bytes=max_bytes), where)
    if check is not None:
        check(doc, where)
    if schema_name is not None:
        validate(doc, schema_name, where)
    return doc


def check_probe_verdict(doc: Any, where: str) -> None:
    """A probe verdict is data: the probe's schema, and no verdict that contradicts itself."""
    validate(doc, "probe", where)
    if doc.get("verdict") == "healthy" and (doc.get("stalled") or doc.get("error")):
        raise InvalidInput(
            f"{where}: verdict: 'healthy' with a stall or an error contradicts itself"
        )
    node = doc.get("node") or {}
    if node.get("nnodes") == 1 and node.get("experiment"):
        raise InvalidInput(
            f"{where}: its main run ran with one experiment's setting "
            f"({one_line(str(node['experiment']))}), not the host's default: plan from "
            "`gpufix probe HOST`, whose experiments run after the default"
        )
    if node.get("nnodes") == 1 and node.get("ifname"):
        raise InvalidInput(
            f"{where}: its runs used the interface {one_line(str(node['ifname']))} "
            "(--ifname), not the host's default choice: plan from `gpufix probe HOST` "
            "without --ifname"
        )


def load_probe_verdict(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A verdict file: the verdict itself, or what `gpufix probe HOST --json` prints for one host
    ({host: verdict}); a document with several hosts' verdicts is refused (which one?)."""
    where = f"probe verdict file {one_line(str(path))}"
    doc = load_json(path, "verdict", check=_object)
    if "format" not in doc and doc and all(isinstance(v, dict) for v in doc.values()):
        if len(doc) > 1:
            hosts = one_line(", ".join(sorted(str(k) for k in doc)))
            raise InvalidInput(
                f"{where}: verdicts of {len(doc)} hosts ({hosts}); save one host's verdict "
                "(gpufix probe HOST --json for that host alone)"
            )
        ((name, doc),) = doc.items()
        doc = {**doc, "inventory_host": doc.get("inventory_host", name)}  # the name probed
    if doc.get("reached") is False:
        raise InvalidInput(
            f"{where}: the probe never reached {one_line(str(doc.get('host')))} "
            f"({one_line(str(doc.get('error')))[:200]}): no verdict to plan from"
        )
    check_probe_verdict(doc, where)
    result: dict[str, Any] = doc
    return result


def _object(doc: Any, where: str) -> None:
    if not isinstance(doc, dict):
        raise InvalidInput(f"{where}: expected a JSON object")
