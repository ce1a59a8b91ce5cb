"""Resolve host and group names against an Ansible inventory, without running Ansible.

A host may be backed by a recorded snapshot (`gpufix_snapshot: path` in its vars): the
example inventory uses this so `gpufix plan host01` works on a fresh clone with no SSH.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpufix.errors import InvalidInput

# Host, group, or a list of them (a,b  a:b  a:&b  a:!b), wildcards and ranges; no regex (~).
_PATTERN_CHARS = re.compile(r"^[A-Za-z0-9_.*!&,:\[\]@-]{1,1024}$")
_YAML_ERROR = re.compile(
    r"Syntax Error while loading YAML\. (.*?) The error appears to be in '.*?': (line \d+, column \d+)"
)
_PLUGIN_FAILURE = re.compile(r"Failed to parse .*? with (\w+) plugin: (.*?)(?=\[WARNING\]|$)", re.S)


@dataclass(frozen=True)
class Target:
    name: str
    snapshot: Path | None  # set when the host is recorded, not live
    vars: dict[str, Any]


def _quiet_ansible() -> None:
    """gpufix reports unknown names itself, in one line: keep Ansible's warnings off stderr.
    ansible.constants reads these once, at its first import, so call this before any.
    The configuration is gpufix's own, as for its playbook runs (runner._env): an ansible.cfg
    in the working directory (a bundle someone sent) could name plugins that run here."""
    from gpufix.paths import content_root

    os.environ["ANSIBLE_CONFIG"] = str(content_root() / "ansible.cfg")
    os.environ.setdefault("ANSIBLE_HOST_PATTERN_MISMATCH", "ignore")
    os.environ.setdefault("ANSIBLE_LOCALHOST_WARNING", "False")
    os.environ.setdefault("ANSIBLE_INVENTORY_UNPARSED_WARNING", "False")
    # a source no plugin can parse is an error (named in one line), not an empty inventory
    os.environ.setdefault("ANSIBLE_INVENTORY_UNPARSED_FAILED", "True")


def check_pattern(pattern: str) -> None:
    """Refuse a target that is empty or could match more than the user named: '' and ','
    (every host, to Ansible), regex patterns ('~...'), empty list elements."""
    from gpufix.inputs import one_line

    if not pattern or pattern != pattern.strip():
        raise InvalidInput(
            f"empty or padded target {one_line(repr(pattern))}: name a host or group"
        )
    if not _PATTERN_CHARS.fullmatch(pattern):
        raise InvalidInput(
            f"target {one_line(repr(pattern), 80)}: a host or group name, or a list of them "
            "(ASCII letters, digits, . _ - * [ ] , : ! &); regex patterns are not accepted"
        )
    parts = re.split(r"[,:]", re.sub(r"\[[^\]]*\]", "[]", pattern))
    if any(part.lstrip("!&") == "" for part in parts):
        raise InvalidInput(f"target {pattern!r} has an empty element: name a host or group")


def _elements(pattern: str) -> list[str]:
    """A list target's elements: split at `,` and `:` outside `[...]` (a range or slice)."""
    out, depth, cur = [], 0, ""
    for ch in pattern:
        depth += (ch == "[") - (ch == "]")
        if ch in ",:" and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    return [*out, cur]


def _matches(im: Any, element: str) -> bool:
    """Whether one element of a list target (`!` exclude and `&` intersect stripped) names at
    least one host of the inventory."""
    from ansible.errors import AnsibleError

    try:
        return bool(im.get_hosts(pattern=element.lstrip("!&")))
    except AnsibleError:
        return False


def _manager(inventory: Path) -> Any:
    """Parse the inventory quietly; a source no plugin can read is one line naming the cause."""
    from ansible.errors import AnsibleError
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader

    from gpufix.inputs import one_line

    captured = io.StringIO()
    try:
        with contextlib.redirect_stderr(captured), contextlib.redirect_stdout(captured):
            return InventoryManager(loader=DataLoader(), sources=[str(inventory)])
    except AnsibleError:
        text = " ".join(captured.getvalue().split())
        found = dict(_PLUGIN_FAILURE.findall(text))
        want = "yaml" if inventory.suffix in (".yml", ".yaml") else "ini"
        why = found.get(want) or next(iter(found.values()), "no inventory plugin could read it")
        yaml_error = _YAML_ERROR.search(why)
        if yaml_error:
            why = f"YAML syntax error at {yaml_error.group(2)}: {yaml_error.group(1)}"
        raise InvalidInput(f"cannot parse inventory {inventory}: {one_line(why)}") from None
    except Exception as exc:
        # After parsing, Ansible checks the groups it built and raises a plain Exception ("can't
        # add group to itself" for a host named ungrouped or all): still the inventory's fault.
        # Only that plain class: a TypeError or RecursionError is a bug, not bad input.
        if type(exc) is not Exception:
            raise
        raise InvalidInput(f"cannot parse inventory {inventory}: {one_line(str(exc))}") from None


_MAX_BYTES = 16 * 1024 * 1024  # an inventory, all its files together
_MAX_FILES = 10000
_MAX_RANGE_HOSTS = 100_000  # the hosts one line's ranges may name (`h[0:99999999]`)
_PATH_MAX = 4096
_RANGE = re.compile(r"\[(\d{1,12}):(\d{1,12})(?::(\d{1,12}))?\]")


def _bounded(inventory: Path) -> None:
    """Before Ansible reads it: regular files, bounded in size together, and no host range
    that expands past _MAX_RANGE_HOSTS names (Ansible expands ranges in memory: 33 bytes,
    `h[0:99999999]`, took gigabytes)."""
    from gpufix.inputs import one_line, read_bytes

    if inventory.is_file():
        files = [inventory]
    else:
        files = []
        for root, _dirs, names in os.walk(inventory):
            files += [Path(root) / n for n in sorted(names)]
            if len(files) > _MAX_FILES:
                raise InvalidInput(f"inventory {inventory}: more than {_MAX_FILES} files")
    total = 0
    for f in files:
        if not inventory.is_file() and not f.is_file():
            try:
                mode = f.stat().st_mode
            except (OSError, ValueError):
                continue  # a dangling link: Ansible's to skip
            if not stat.S_ISDIR(mode):
                # Ansible's inventory plugins open a FIFO and wait on it for good
                raise InvalidInput(
                    f"inventory {inventory}: {one_line(str(f), 200)} is not a regular file "
                    "(a FIFO, a device or a socket): Ansible would wait on it; remove it"
                )
            continue
        data = read_bytes(f, "inventory", max_bytes=_MAX_BYTES)
        total += len(data)
        if total > _MAX_BYTES:
            raise InvalidInput(f"inventory {inventory}: over {_MAX_BYTES >> 20} MiB in all")
        for line in data.decode("utf-8", "replace").splitlines():
            count = 1
            for m in _RANGE.finditer(line):
                first, last, step = int(m.group(1)), int(m.group(2)), int(m.group(3) or 1)
                count *= max(0, (last - first) // max(step, 1) + 1)
            if count > _MAX_RANGE_HOSTS:
                raise InvalidInput(
                    f"inventory {f}: a host range names {count} hosts (at most "
                    f"{_MAX_RANGE_HOSTS}): {one_line(line.strip(), 80)}"
                )


LOCAL_NAMES = ("localhost", "127.0.0.1")


def unlisted_local(inventory: Path, names: list[str]) -> list[str]:
    """Of NAMES, the local names (localhost, 127.0.0.1) the inventory does not list: Ansible
    matches its implicit localhost for them in ad hoc runs, but never in a play's `hosts: all`."""
    local = [n for n in names if n in LOCAL_NAMES]
    if not local:
        return []
    _quiet_ansible()
    listed = _manager(inventory).hosts
    return [n for n in local if n not in listed]


def resolve(pattern: str, inventory: Path) -> list[Target]:
    """Hosts matched by a host name, group name or Ansible pattern, in inventory order."""
    check_pattern(pattern)
    if not inventory.is_file() and not inventory.is_dir():
        if inventory.exists():
            raise InvalidInput(f"inventory {inventory} is not a regular file or a directory")
        raise InvalidInput(f"inventory not found: {inventory}")
    _bounded(inventory)
    _quiet_ansible()
    from ansible.errors import AnsibleError
    from ansible.parsing.dataloader import DataLoader
    from ansible.vars.manager import VariableManager

    try:
        im = _manager(inventory)
        hosts = im.get_hosts(pattern=pattern)
    except AnsibleError as exc:
        raise InvalidInput(f"bad host pattern {pattern!r}: {exc}") from None
    if not hosts:
        if pattern in LOCAL_NAMES:
            return [Target(name=pattern, snapshot=None, vars={"ansible_connection": "local"})]
        if not im.hosts:
            raise InvalidInput(f"no host or group {pattern!r}: {inventory} lists no hosts")
        if pattern in im.groups:
            raise InvalidInput(f"group {pattern!r} in {inventory} has no hosts")
        raise InvalidInput(
            f"no host or group {pattern!r} in {inventory} "
            f"(known groups: {', '.join(sorted(im.groups)) or 'none'})"
        )
    parts = _elements(pattern)
    unknown = [e for e in parts if len(parts) > 1 and not _matches(im, e)]
    if unknown:
        # a typo must not shrink the run (or, after `!`, widen it) without a word
        raise InvalidInput(
            f"target {pattern!r}: {', '.join(repr(e) for e in unknown)} matches no host or "
            f"group in {inventory}: nothing was done; fix or drop it"
        )
    vm = VariableManager(loader=DataLoader(), inventory=im)
    targets = []
    for h in hosts:
        hv = vm.get_vars(host=h, include_hostvars=False)
        snap = hv.get("gpufix_snapshot")
        snap_path = None
        if snap is not None and (not isinstance(snap, str) or len(snap) > _PATH_MAX):
            # never str() of it: an alias-expanded YAML structure can be gigabytes of text
            raise InvalidInput(f"{h.name}: gpufix_snapshot must be a file path (a string)")
        if snap is not None and not str(snap).strip():
            # an empty value must not turn a recorded host into a live one
            raise InvalidInput(
                f"{h.name}: gpufix_snapshot is empty: name a snapshot file or drop it"
            )
        if snap is not None and "\x00" in snap:  # no file system takes it: a path that is none
            raise InvalidInput(f"{h.name}: gpufix_snapshot holds a NUL character")
        if snap:
            base = inventory if inventory.is_dir() else inventory.parent
            snap_path = (base / str(snap)).resolve()
        plain = {k: v for k, v in hv.items() if k.startswith(("gpufix_", "ansible_"))}
        targets.append(Target(name=h.name, snapshot=snap_path, vars=plain))
    return targets
