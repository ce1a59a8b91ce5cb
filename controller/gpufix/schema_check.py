"""JSON Schema validation in which a pattern's closing `$` is the end of the string and `\\d` an
ASCII digit, as in ECMA-262, the schemas' regex dialect. Python's `re.search` lets `$` match
before a final newline, so `"host01\\n"` passed `^[A-Za-z0-9_][A-Za-z0-9_.:@-]{0,252}$`."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from functools import cache
from typing import Any

import jsonschema
from jsonschema.exceptions import ValidationError, best_match


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


def _is_unknown_form(branch: Any) -> bool:
    return isinstance(branch, Mapping) and str(branch.get("$ref", "")).endswith("/unknown")


def _meant(err: ValidationError) -> list[ValidationError] | None:
    """Of an anyOf/oneOf nothing matched, the errors of the one alternative the value was meant
    for: not one whose type the value does not have; the `{unknown: why}` form exactly when the
    value has an `unknown` key. None when that is not exactly one alternative."""
    options = err.validator_value if isinstance(err.validator_value, list) else []
    says_unknown = isinstance(err.instance, dict) and "unknown" in err.instance
    branches: dict[Any, list[ValidationError]] = {}
    for sub in err.context or []:
        branches.setdefault(sub.relative_schema_path[0], []).append(sub)
    meant = []
    for i, subs in branches.items():
        if any(s.validator == "type" and not s.relative_path for s in subs):
            continue
        unknown_form = isinstance(i, int) and i < len(options) and _is_unknown_form(options[i])
        if unknown_form == says_unknown:  # with an `unknown` key, the unknown form was meant
            meant.append(subs)
    return meant[0] if len(meant) == 1 else None


_KINDS = {"object": "an object", "array": "a list", "integer": "an integer", "string": "a string",
          "number": "a number", "boolean": "true or false", "null": "null"}  # fmt: skip


def _forms(options: Any) -> list[str]:
    """The alternatives as a person writes them, when each is the unknown form or plain types."""
    out: list[str] = []
    for o in options if isinstance(options, list) else []:
        kinds = o.get("type") if isinstance(o, Mapping) else None
        if _is_unknown_form(o):
            out.append('{"unknown": "why"}')
        elif isinstance(kinds, (str, list)):
            out += [_KINDS.get(k, k) for k in ([kinds] if isinstance(kinds, str) else kinds)]
        else:
            return []
    return out


def _short(value: Any) -> str:
    """The value as JSON writes it (true, null, {"a": 1}), or its kind when long."""
    try:
        shown = json.dumps(value, ensure_ascii=True)
    except (TypeError, ValueError):
        shown = repr(value)
    return shown if len(shown) <= 80 else f"a {type(value).__name__}"


def explain(errors: list[ValidationError]) -> tuple[ValidationError, str | None]:
    """The error to tell a person first, and a message for it where jsonschema's would not do:
    inside an anyOf/oneOf, the error of the alternative the value was meant for, not "is not
    valid under any of the given schemas"; an object's missing fields named at once, not one
    per run."""
    first = best_match(errors)
    while first.validator in ("anyOf", "oneOf") and first.context:
        meant = _meant(first)
        if not meant:
            forms = _forms(first.validator_value)
            if forms:
                return first, f"{_short(first.instance)} is not {' or '.join(forms)}"
            break
        first = best_match(meant)
    if first.validator == "required" and isinstance(first.instance, dict):
        missing = [str(k) for k in first.validator_value if k not in first.instance]
        if len(missing) > 1:
            return first, f"missing required fields: {', '.join(missing)}"
    if first.validator == "type" and first.instance is None and first.absolute_path:
        # "error: None is not of type 'string'" read as the message's own prefix (a review)
        name = first.absolute_path[-1]
        want = first.validator_value
        kinds = " or ".join(want) if isinstance(want, list) else str(want)
        return first, f"field {name!r} is null here, and must be {kinds}"
    return first, None


def described(
    errors: list[ValidationError], message: Callable[[ValidationError], str] = lambda e: e.message
) -> list[str]:
    """Every error as "path: message", the one `explain` picks first and told its way."""
    first, told = explain(errors)
    ordered = [first] + [e for e in errors if e is not first]
    return [
        f"{'/'.join(str(p) for p in e.absolute_path) or '(document)'}: "
        f"{told if e is first and told else message(e)}"
        for e in ordered
    ]
