"""The module's own command-line arguments: `parser.add_argument("--name", ...)` found by the
name a script reads back (`args.name`; dashes in the flag become underscores, argparse docs)."""

from __future__ import annotations

import ast

from .callsites import keyword
from .project import SourceFile


def add_argument(sf: SourceFile, dest: str) -> ast.Call | None:
    """The module's `add_argument` call for `--dest` (or `--de-st`), if any."""
    flags = {f"--{dest}", f"--{dest.replace('_', '-')}"}
    for node in ast.walk(sf.tree) if sf.tree is not None else ():
        f = node.func if isinstance(node, ast.Call) else None
        if not (isinstance(f, ast.Attribute) and f.attr == "add_argument"):
            continue
        assert isinstance(node, ast.Call)
        if flags & {sf.names.const_str(a) for a in node.args}:
            dest_kw = keyword(node, "dest")
            if dest_kw is None or sf.names.const_str(dest_kw) == dest:
                return node
    return None


def off_unless_given(sf: SourceFile, dest: str) -> bool:
    """`--dest` is a flag that is off unless the user passes it: `action="store_true"` (its
    default is False) or an explicit `default=False`."""
    call = add_argument(sf, dest)
    if call is None:
        return False
    action = keyword(call, "action")
    if action is not None and sf.names.const_str(action) == "store_true":
        default = keyword(call, "default")
        return default is None or (isinstance(default, ast.Constant) and default.value is False)
    default = keyword(call, "default")
    return isinstance(default, ast.Constant) and default.value is False
