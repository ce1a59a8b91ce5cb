"""JSON Schema validation in which a pattern's closing `$` is the end of the string and `\\d` an
ASCII digit, as in ECMA-262, the schemas' regex dialect. Python's `re.search` lets `$` match
before a final newline, so `"host01\\n"` passed `^[A-Za-z0-9_][A-Za-z0-9_.:@-]{0,252}$`."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from functools import cache
from typing import Any

import jsonschema
from jsonschema.exceptions import ValidationError


@cache
def _compiled(pattern: str) -> re.Pattern[str]:
    if pattern.endswith("$") and not pattern.endswith("\\$"):
        pattern = pattern[:-1] + r"\Z"
    return re.compile(pattern, re.ASCII)  # ECMA-262's `\d` and `\w` are ASCII


def _pattern(
    validator: Any, pattern: str, instance: Any, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not _compiled(pattern).search(instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


_Strict = jsonschema.validators.extend(jsonschema.Draft202012Validator, {"pattern": _pattern})


def validator(schema: Mapping[str, Any]) -> jsonschema.Draft202012Validator:
    """A Draft 2020-12 validator for `schema` with ECMA-262 end anchors."""
    made: jsonschema.Draft202012Validator = _Strict(schema)
    return made
