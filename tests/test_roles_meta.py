"""Every role's meta/argument_specs.yml agrees with its defaults/main.yml.

For each role under roles/: every default is described, every described option without
`required: true` has a default, the spec's `default:` equals the real default, names carry the
role's prefix, and each option has a type and a description.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

ROLES = Path(__file__).resolve().parent.parent / "roles"
TYPES: dict[str, tuple[type, ...]] = {
    "str": (str,),
    "int": (int,),
    "bool": (bool,),
    "float": (float, int),
    "list": (list,),
    "dict": (dict,),
    "path": (str,),
    "raw": (object,),
}


def role_names() -> list[str]:
    return (
        sorted(p.name for p in ROLES.iterdir() if (p / "tasks").is_dir()) if ROLES.is_dir() else []
    )


def _load(path: Path) -> Any:
    return yaml.safe_load(path.read_text()) if path.is_file() else None


def _spec(role: str) -> dict[str, Any]:
    data = _load(ROLES / role / "meta" / "argument_specs.yml")
    assert isinstance(data, dict), f"{role}: meta/argument_specs.yml missing or empty"
    main = data.get("argument_specs", {}).get("main")
    assert isinstance(main, dict), f"{role}: argument_specs.main missing"
    assert main.get("short_description"), f"{role}: argument_specs.main.short_description missing"
    return main.get("options") or {}


def _defaults(role: str) -> dict[str, Any]:
    return _load(ROLES / role / "defaults" / "main.yml") or {}


def test_roles_exist() -> None:
    assert role_names(), "no roles under roles/"


@pytest.mark.parametrize("role", role_names())
def test_defaults_and_spec_name_the_same_variables(role: str) -> None:
    options, defaults = _spec(role), _defaults(role)
    undocumented = sorted(set(defaults) - set(options))
    assert not undocumented, f"{role}: defaults not in argument_specs: {undocumented}"
    missing = sorted(k for k, v in options.items() if k not in defaults and not v.get("required"))
    assert not missing, (
        f"{role}: optional options without a default in defaults/main.yml: {missing}"
    )
    required_with_default = sorted(
        k for k, v in options.items() if v.get("required") and k in defaults
    )
    assert not required_with_default, (
        f"{role}: required options with a default: {required_with_default}"
    )


@pytest.mark.parametrize("role", role_names())
def test_spec_defaults_match(role: str) -> None:
    options, defaults = _spec(role), _defaults(role)
    for name, option in options.items():
        if name in defaults and "default" in option:
            assert option["default"] == defaults[name], (
                f"{role}: {name}: argument_specs default {option['default']!r} "
                f"!= defaults/main.yml {defaults[name]!r}"
            )


@pytest.mark.parametrize("role", role_names())
def test_options_typed_described_prefixed(role: str) -> None:
    prefix = f"gpufix_{role}_"
    for name, option in _spec(role).items():
        assert name.startswith(prefix), f"{role}: {name} lacks the prefix {prefix}"
        assert option.get("description"), f"{role}: {name} has no description"
        kind = option.get("type", "str")
        assert kind in TYPES, f"{role}: {name}: unknown type {kind!r}"
        default = _defaults(role).get(name)
        is_template = isinstance(default, str) and "{{" in default
        if default is not None and not is_template:
            assert isinstance(default, TYPES[kind]), (
                f"{role}: {name}: default {default!r} is not a {kind}"
            )
            if kind in ("int", "float"):
                assert not isinstance(default, bool), f"{role}: {name}: bool given for {kind}"
        if "choices" in option and default is not None and not is_template:
            values = default if kind == "list" else [default]
            bad = [v for v in values if v not in option["choices"]]
            assert not bad, f"{role}: {name}: default {bad} not among choices {option['choices']}"


DOCS = ROLES.parent / "docs" / "roles.md"


def _doc_section(role: str) -> str | None:
    if not DOCS.is_file():
        return None
    text = DOCS.read_text()
    marker = f"\n## {role}\n"
    if marker not in text:
        return None
    body = text.split(marker, 1)[1]
    return body.split("\n## ", 1)[0]


@pytest.mark.parametrize("role", role_names())
def test_documented_roles_list_every_option(role: str) -> None:
    section = _doc_section(role)
    if section is None:
        pytest.skip(f"docs/roles.md has no section for {role} yet")
    missing = sorted(name for name in _spec(role) if f"`{name}`" not in section)
    assert not missing, f"docs/roles.md section {role} lacks: {missing}"
