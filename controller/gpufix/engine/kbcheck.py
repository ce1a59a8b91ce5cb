"""Row checks for the knowledge base tables: each turns one YAML value into a typed one or
raises RowError, which the loader reports with the file and the row."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet

# Versions in the data are plain dotted numbers ("5.4", "530.30.02"); wheel versions may carry a
# local part ("2.1.0a0+32f93b1"), so those fields use the looser WHEEL pattern.
DOTTED = re.compile(r"\d+(?:\.\d+)*")
WHEEL = re.compile(r"\d+(?:\.\d+)*(?:(?:a|b|rc)\d+)?(?:\+[0-9A-Za-z.]+)?")


class RowError(Exception):
    """A problem with one field; the loader adds the file and row."""


def text(v: object) -> str:
    if not isinstance(v, str) or not v.strip():
        raise RowError("must be a non-empty string")
    return v.strip()


def pattern(pat: re.Pattern[str], what: str) -> Callable[[object], str]:
    def check(v: object) -> str:
        # YAML reads 12.10 as the float 12.1: insist on quoted strings so that cannot happen.
        if not isinstance(v, str):
            raise RowError(f"must be a quoted {what} string, got {v!r}")
        if not pat.fullmatch(v):
            raise RowError(f"malformed {what} {v!r}")
        return v

    return check


version = pattern(DOTTED, "version")
day = pattern(re.compile(r"\d{4}-\d{2}-\d{2}"), "date (YYYY-MM-DD)")
wheel_version = pattern(WHEEL, "version")


def integer(v: object) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise RowError(f"must be an integer, got {v!r}")
    return v


def boolean(v: object) -> bool:
    if not isinstance(v, bool):
        raise RowError(f"must be true or false, got {v!r}")
    return v


def listof(item: Callable[[object], Any]) -> Callable[[object], tuple[Any, ...]]:
    def check(v: object) -> tuple[Any, ...]:
        if not isinstance(v, list):
            raise RowError(f"must be a list, got {v!r}")
        return tuple(item(x) for x in v)

    return check


def optional(check: Callable[[object], Any]) -> Callable[[object], Any]:
    return lambda v: None if v is None else check(v)


def choice(options: tuple[str, ...]) -> Callable[[object], str]:
    def check(v: object) -> str:
        if v not in options:
            raise RowError(f"must be one of {', '.join(options)}, got {v!r}")
        return str(v)

    return check


def spec(v: object) -> str:
    s = text(v)
    try:
        SpecifierSet(s)
    except InvalidSpecifier:
        raise RowError(f"malformed version specifier {s!r}") from None
    return s


def mapping(
    key: Callable[[object], str], value: Callable[[object], str]
) -> Callable[[object], Mapping[str, str]]:
    def check(v: object) -> Mapping[str, str]:
        if not isinstance(v, dict):
            raise RowError(f"must be a mapping, got {v!r}")
        return MappingProxyType({key(k): value(x) for k, x in v.items()})

    return check


def setting_value(v: object) -> str:
    # nccl.conf values are text; quote numbers in the YAML so "1" stays "1".
    if not isinstance(v, str):
        raise RowError(f"setting values must be quoted strings, got {v!r}")
    return v


def source(v: object) -> str:
    try:
        return text(v)
    except RowError:
        raise RowError("has no source (a URL or document name)") from None


@dataclass(frozen=True)
class Table:
    cls: type
    fields: Mapping[str, Callable[[object], Any]]
    optional: frozenset[str]
    key: str  # the field that names a row in messages and must be unique ("" = none)
    empty_ok: bool = False  # a table that may hold no rows yet (written as `[]`)


NOTE = {"note": optional(text)}


def table(
    cls: type,
    key: str,
    optional: tuple[str, ...],
    empty_ok: bool = False,
    **fields: Callable[[object], Any],
) -> Table:
    all_fields = {**fields, **NOTE, "source": source}
    return Table(cls, MappingProxyType(all_fields), frozenset((*optional, "note")), key, empty_ok)
