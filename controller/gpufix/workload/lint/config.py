"""`[tool.gpufix.lint]` in pyproject.toml: which files, which rules at which level, which Python.

[tool.gpufix.lint]
include = ["src/**", "train.py"]      # globs relative to the project root (default: all)
exclude = ["third_party/**"]
target-version = "py311"               # default: requires-python's lower bound
[tool.gpufix.lint.severity]
GPF002 = "off"                         # error | warning | note | off
[tool.gpufix.lint.contexts]
tests = "off"                          # off | note | as-is, for tests, examples, library
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from gpufix import inputs
from gpufix.errors import InvalidInput

from . import globs
from .rules import LEVELS, RULES_BY_ID

CONTEXTS = ("tests", "examples", "library")
POLICIES = ("off", "note", "as-is")
# Tests wrap models in DataParallel and set debug knobs on purpose; installed or vendored code is
# not the user's to change; examples are what users copy, so they are shown but do not fail.
DEFAULT_POLICY: Mapping[str, str] = {"tests": "off", "examples": "note", "library": "off"}
_TARGET = re.compile(r"^(?:py)?3\.?(\d{1,2})$")
# The newest Python 3 release: 3.15.0 came out in October 2026 (PEP 790's schedule,
# https://peps.python.org/pep-0790/). A higher target is a typo (py399), not a future Python.
NEWEST_MINOR = 15
_KEYS = frozenset({"include", "exclude", "target-version", "severity", "contexts"})


@dataclass(frozen=True)
class LintConfig:
    root: Path
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    severity: Mapping[str, str] = field(default_factory=dict)  # rule -> level | off
    contexts: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_POLICY))
    target: tuple[int, int] | None = None  # None: unknown
    target_origin: str = "unknown"
    source: str = ""  # the pyproject.toml read, or ""


def parse_target(text: str) -> tuple[int, int]:
    """'py311', '3.11' or 'py3.11' -> (3, 11); only a Python 3 release that exists."""
    m = _TARGET.match(text.strip())
    if not m or int(m.group(1)) > NEWEST_MINOR:
        raise InvalidInput(
            f"bad target version {text!r}; use a Python release from 3.0 to 3.{NEWEST_MINOR}, "
            "e.g. py311 or 3.11"
        )
    return (3, int(m.group(1)))


def lower_bound(requires_python: str) -> tuple[int, int] | None:
    """The oldest Python a `requires-python` specifier admits, as (3, minor); None if open."""
    try:
        spec = SpecifierSet(requires_python)
    except InvalidSpecifier:
        raise InvalidInput(f"bad requires-python {requires_python!r}") from None
    bounds = []
    for s in spec:
        if s.operator in (">=", "~=", "==", "===", ">"):
            parts = re.findall(r"\d+", s.version)
            if len(parts) >= 2 and parts[0] == "3":
                bounds.append((3, int(parts[1])))
    return max(bounds) if bounds else None


def _load_toml(path: Path) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.10 only
        try:
            import tomli as tomllib
        except ImportError:
            raise InvalidInput("reading pyproject.toml needs Python 3.11+ or tomli") from None
    text = inputs.read_text(path, "text")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise InvalidInput(f"{path}: not valid TOML: {e}") from None
    except RecursionError:  # tomllib recurses per nested array or table
        raise InvalidInput(f"{path}: nested too deeply to read as TOML") from None


def find_pyproject(start: Path) -> Path | None:
    """The nearest pyproject.toml at or above `start`, up to the checkout's root (`.git`): one
    above it is another project's, whose root would make the checkout's own paths (its
    `examples/`) decide how every file is judged."""
    here = start if start.is_dir() else start.parent
    for d in (here, *here.parents):
        candidate = d / "pyproject.toml"
        if candidate.is_file():
            return candidate
        if (d / ".git").exists():
            return None
    return None


def _strings(table: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidInput(f"{where}: {key} must be a list of glob strings")
    return globs.check(tuple(value), f"{where} {key}")


def _rooted(patterns: tuple[str, ...], root: Path) -> tuple[str, ...]:
    """An absolute pattern inside the project is made relative to its root (it could never
    match a root-relative path otherwise)."""
    out = []
    for p in patterns:
        if os.path.isabs(p):
            rel = os.path.relpath(p, root)
            p = p if rel.startswith("..") else rel.replace(os.sep, "/")
        out.append(p)
    return tuple(out)


def _upper_keys(table: Any, where: str) -> Any:
    """Rule ids in any case (`gpf002`), as `# noqa` takes them; one rule twice is refused, not
    settled by which spelling comes last."""
    if not isinstance(table, dict):
        return table
    out: dict[str, Any] = {}
    for k, v in table.items():
        key = str(k).upper()
        if key in out:
            raise InvalidInput(f"{where}: {key} is given twice ({k!r} and another spelling)")
        out[key] = v
    return out


def _choices(table: Any, allowed_keys: Any, allowed: tuple[str, ...], where: str) -> dict[str, str]:
    if not isinstance(table, dict):
        raise InvalidInput(f"{where} must be a table")
    out = {}
    for key, value in table.items():
        if key not in allowed_keys:
            raise InvalidInput(f"{where}: unknown key {key!r}")
        if value not in allowed:
            raise InvalidInput(f"{where}.{key}: {value!r} is not one of {', '.join(allowed)}")
        out[key] = value
    return out


def from_table(
    table: Mapping[str, Any],
    root: Path,
    requires: str | None,
    source: str,
    target_override: tuple[int, int] | None = None,
) -> LintConfig:
    """Build a config from the `[tool.gpufix.lint]` table (validated) and `requires-python`;
    `--target-version` (`target_override`) wins over both."""
    name = f"{source or 'config'} "
    where = f"{name}[tool.gpufix.lint]"
    unknown = set(table) - _KEYS
    if unknown:
        raise InvalidInput(f"{where}: unknown key {sorted(unknown)[0]!r}")
    sev_where = f"{name}[tool.gpufix.lint.severity]"
    severity = _choices(
        _upper_keys(table.get("severity", {}), sev_where), RULES_BY_ID, (*LEVELS, "off"), sev_where
    )
    contexts = {
        **DEFAULT_POLICY,
        **_choices(
            table.get("contexts", {}), CONTEXTS, POLICIES, f"{name}[tool.gpufix.lint.contexts]"
        ),
    }
    target, origin = None, "unknown"
    if target_override is not None:
        target, origin = target_override, "--target-version"
    elif "target-version" in table:
        if not isinstance(table["target-version"], str):
            raise InvalidInput(f"{where}: target-version must be a string such as py311")
        try:
            target, origin = parse_target(table["target-version"]), "target-version"
        except InvalidInput as exc:
            raise InvalidInput(f"{where}: {exc}") from None
    elif requires:
        try:
            target = lower_bound(requires)
        except InvalidInput as exc:
            raise InvalidInput(f"{name}[project]: {exc}") from None
        origin = f"requires-python {requires}" if target else "unknown"
    return LintConfig(
        root,
        _rooted(_strings(table, "include", where), root),
        _rooted(_strings(table, "exclude", where), root),
        severity,
        contexts,
        target,
        origin,
        source,
    )


def _table(doc: Mapping[str, Any], keys: tuple[str, ...], path: Path) -> Any:
    """doc[keys...], or {} when absent; a non-table on the way is bad input, not a crash."""
    here: Any = doc
    for i, key in enumerate(keys):
        here = here.get(key, {})
        if not isinstance(here, dict) and i < len(keys) - 1:
            raise InvalidInput(f"{path}: [{'.'.join(keys[: i + 1])}] must be a table")
    return here


def load_config(
    paths: list[str],
    config_file: str | None = None,
    target_override: tuple[int, int] | None = None,
) -> LintConfig:
    """The configuration for a run over `paths`: the nearest pyproject.toml, or defaults."""
    pyproject: Path | None
    if config_file is not None:
        pyproject = Path(config_file)
        if not pyproject.is_file():
            if os.path.lexists(config_file):  # a FIFO, a directory, a dangling link
                raise InvalidInput(f"config file {config_file} is not a regular file")
            raise InvalidInput(f"no such config file: {config_file}")
    else:
        pyproject = find_pyproject(Path(_common_dir(paths)).resolve())
    if pyproject is None:
        config = LintConfig(_project_root(Path(_common_dir(paths))))
        if target_override is None:
            return config
        return replace(config, target=target_override, target_origin="--target-version")
    doc = _load_toml(pyproject)
    tool = _table(doc, ("tool", "gpufix", "lint"), pyproject)
    requires = _table(doc, ("project", "requires-python"), pyproject) or None
    if not isinstance(tool, dict):
        raise InvalidInput(f"{pyproject}: [tool.gpufix.lint] must be a table")
    if target_override is not None:
        requires = None  # --target-version wins: a bad requires-python does not matter
    elif requires is not None and not isinstance(requires, str):
        raise InvalidInput(f"{pyproject}: requires-python must be a string")
    # --config names a file that may live anywhere (ci/gpufix.toml): its globs are read from
    # the directory lint runs in, as ruff reads a --config file's relative paths
    root = Path.cwd() if config_file is not None else pyproject.parent
    return from_table(tool, root, requires, str(pyproject), target_override)


def _project_root(common: Path) -> Path:
    """Without a pyproject.toml: the checkout that holds the paths (`.git`), so `tests/t.py`
    named alone is still a test; else the paths' common directory."""
    for d in (common, *common.parents):
        if (d / ".git").exists():
            return d
    return common


def source_root(paths: list[str], config: LintConfig) -> Path | None:
    """What SARIF's paths are relative to: the checkout (`.git`) that holds the paths, as
    GitHub reads them relative to the repository's root, else the project whose pyproject.toml
    the run read; None (paths as given, absolute ones as file URIs) for paths in no checkout or
    project (files from unrelated trees have no common root worth naming)."""
    common = Path(_common_dir(paths)).resolve()
    for d in (common, *common.parents):
        if (d / ".git").exists():
            return d
    return Path(config.root).resolve() if config.source else None


def _common_dir(paths: list[str]) -> str:
    dirs = [p if os.path.isdir(p) else os.path.dirname(p) or "." for p in paths or ["."]]
    try:
        return os.path.commonpath([os.path.abspath(d) for d in dirs])
    except ValueError:  # different drives
        return os.path.abspath(dirs[0])
