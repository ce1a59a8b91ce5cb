"""Every variable a playbook receives from gpufix is checked here first: name known to the
playbook's roles (meta/argument_specs.yml) or to the shared playbook, type and choices as the
spec says, value by pattern (gpufix.apply.varspec). A value from a plan file, a journal or a
host fact that fails is refused with one line; nothing is run."""

from __future__ import annotations

import re
from functools import cache
from typing import Any

import yaml

from gpufix import inputs
from gpufix.apply.varspec import (
    ALLOW_EMPTY,
    DICT_PATTERNS,
    FILE_ID_MAX,
    INT_RANGES,
    NEVER_IN_PLAN,
    PATTERNS,
    ROLE_EXTRAS,
    SAVED_FILE_KEYS,
    SHARED,
    VAR_PATTERNS,
)
from gpufix.errors import InvalidInput
from gpufix.paths import content_root

_COMPILED = {name: re.compile(p) for name, p in PATTERNS.items()}
_NEVER = [re.compile(p) for p in NEVER_IN_PLAN]
_NAME = re.compile(r"^gpufix_[a-z0-9_]{1,80}$")


@cache
def role_options(role: str) -> dict[str, dict[str, Any]]:
    """The `main` entry point's options of roles/<role>/meta/argument_specs.yml."""
    path = content_root() / "roles" / role / "meta" / "argument_specs.yml"
    doc = yaml.safe_load(inputs.read_text(path, "text"))
    options: dict[str, dict[str, Any]] = doc["argument_specs"]["main"].get("options") or {}
    return options


def _roles_in(node: Any) -> list[str]:
    """Role names a play list uses: `roles:` entries and include_role/import_role tasks."""
    out: list[str] = []
    if isinstance(node, list):
        for item in node:
            out += _roles_in(item)
    elif isinstance(node, dict):
        for key, value in node.items():
            if key == "roles" and isinstance(value, list):
                out += [
                    r if isinstance(r, str) else str(r.get("role") or r.get("name")) for r in value
                ]
            elif key.endswith(("include_role", "import_role")) and isinstance(value, dict):
                out.append(str(value.get("name")))
            elif isinstance(value, (list, dict)):
                out += _roles_in(value)
    return out


@cache
def playbook_roles(playbook: str) -> tuple[str, ...]:
    path = content_root() / "playbooks" / playbook
    doc = yaml.safe_load(inputs.read_text(path, "text"))
    return tuple(dict.fromkeys(_roles_in(doc)))


@cache
def playbook_spec(playbook: str) -> dict[str, dict[str, Any]]:
    """Variable name -> argument spec, for a strategy playbook or a shared one."""
    if playbook in SHARED:
        return dict(SHARED[playbook])
    spec: dict[str, dict[str, Any]] = {}
    for role in playbook_roles(playbook):
        spec.update(role_options(role))
    spec.update(ROLE_EXTRAS.get(playbook, {}))
    return spec


def _match(pattern: str, value: str, name: str, where: str) -> None:
    if not _COMPILED[pattern].fullmatch(value):
        raise InvalidInput(
            f"{where}: {name}: {inputs.one_line(repr(value), 80)} is not a valid {pattern}"
        )


def _check_str(name: str, value: Any, pattern: str | None, where: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InvalidInput(f"{where}: {name}: expected a string, got {type(value).__name__}")
    text = str(value)
    if text == "" and name in ALLOW_EMPTY:
        return
    _match(pattern or "text", text, name, where)


UNSAFE_MODE_BITS = 0o7022  # set-uid, set-gid, sticky; write for group or others


def unsafe_saved_file(saved: dict[str, Any]) -> str:
    """Why a saved file is never written back, or "": every file a strategy watches is root's
    and read by root (a config file, a script, a unit), so one another account owns, set-id or
    writable by group or others would be a way in as root, whoever wrote the record. A group
    may read one (daemon.json, root:docker); records from before owners were kept have none."""
    if not saved.get("exists"):
        return ""
    uid = saved.get("uid", 0)
    if uid != 0:
        return f"owned by uid {uid}"
    try:
        mode = int(str(saved.get("mode", "")), 8)
    except ValueError:
        return ""  # check_vars refuses it with its own message
    return f"mode {saved.get('mode')}" if mode & UNSAFE_MODE_BITS else ""


def _check_saved_file(name: str, value: Any, where: str) -> None:
    if not isinstance(value, dict) or set(value) - set(SAVED_FILE_KEYS):
        raise InvalidInput(f"{where}: {name}: a saved file is {{{', '.join(SAVED_FILE_KEYS)}}}")
    if not isinstance(value.get("exists"), bool):
        raise InvalidInput(f"{where}: {name}: exists must be true or false")
    if value["exists"]:
        if "content_b64" not in value:  # restoring it would write an empty file
            raise InvalidInput(f"{where}: {name}: a saved file that existed has no content_b64")
        _match("file_mode", str(value.get("mode", "")), name, where)
        _match("base64", str(value["content_b64"]), name, where)
    for key in ("uid", "gid"):  # absent in journals from before they were recorded
        if key in value:
            n = value[key]
            if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= FILE_ID_MAX:
                raise InvalidInput(
                    f"{where}: {name}: {key} must be an integer from 0 to {FILE_ID_MAX}"
                )
    if why := unsafe_saved_file(value):
        raise InvalidInput(
            f"{where}: {name}: {why}: gpufix writes back only root's files that are not set-id"
            " or writable by group or others"
        )


def _check_dict(name: str, value: Any, where: str) -> None:
    if not isinstance(value, dict):
        raise InvalidInput(f"{where}: {name}: expected a mapping, got {type(value).__name__}")
    if name not in DICT_PATTERNS:
        raise InvalidInput(f"{where}: {name}: gpufix does not pass this mapping")
    keys, values = DICT_PATTERNS[name]
    for k, v in value.items():
        _check_str(name, k, keys, where)
        if values == "saved_file":
            _check_saved_file(f"{name}[{inputs.one_line(str(k), 80)}]", v, where)
        else:
            _check_str(name, v, values, where)


def check_value(name: str, spec: dict[str, Any], value: Any, where: str) -> None:
    kind = spec.get("type", "str")
    pattern = VAR_PATTERNS.get(name)
    choices = spec.get("choices")
    if choices is not None and kind != "list":
        if value not in choices and str(value) not in [str(c) for c in choices]:
            raise InvalidInput(
                f"{where}: {name}: {inputs.one_line(repr(value), 80)} is not one of {choices}"
            )
        return
    if kind == "bool":
        if not isinstance(value, bool):
            raise InvalidInput(f"{where}: {name}: expected true or false")
    elif kind == "int":
        low, high = INT_RANGES.get(name, (-(10**9), 10**9))
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise InvalidInput(f"{where}: {name}: expected an integer from {low} to {high}")
    elif kind in ("str", "path"):
        _check_str(name, value, pattern or ("abspath" if kind == "path" else None), where)
    elif kind == "list":
        if not isinstance(value, list) or len(value) > 1000:
            raise InvalidInput(f"{where}: {name}: expected a list")
        elem = {"type": spec.get("elements", "str"), "choices": choices}
        for item in value:
            check_value(name, {k: v for k, v in elem.items() if v is not None}, item, where)
    elif kind == "dict":
        _check_dict(name, value, where)
    else:
        raise InvalidInput(f"{where}: {name}: gpufix does not pass {kind} variables")


def check_vars(
    playbook: str, variables: dict[str, Any], where: str, *, plan_step: bool = False
) -> None:
    """Refuse any variable the playbook's roles do not declare, or whose value breaks its spec.
    plan_step: the variables come from a plan, which never sets commands, trust or paths."""
    spec = playbook_spec(playbook)
    for name, value in variables.items():
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise InvalidInput(
                f"{where}: {inputs.one_line(repr(name), 80)} is not a gpufix variable"
            )
        if name not in spec:
            raise InvalidInput(f"{where}: {name} is not a variable of {playbook}")
        if plan_step and any(p.search(name) for p in _NEVER):
            raise InvalidInput(
                f"{where}: {name}: a plan never sets commands, repository trust or paths "
                "(the inventory does)"
            )
        check_value(name, spec[name], value, where)
