"""The module's own command-line arguments: `parser.add_argument("--name", ...)` found by the
name a script reads back (`args.name`; the dest is the first long option with dashes made
underscores, or `dest=`: https://docs.python.org/3/library/argparse.html#dest)."""

from __future__ import annotations

import ast

from .callsites import keyword
from .project import SourceFile


def add_arguments(sf: SourceFile, dest: str) -> list[ast.Call]:
    """The module's `add_argument` calls whose dest is `dest`."""
    flags = {f"--{dest}", f"--{dest.replace('_', '-')}"}
    out = []
    for node in ast.walk(sf.tree) if sf.tree is not None else ():
        f = node.func if isinstance(node, ast.Call) else None
        if not (isinstance(f, ast.Attribute) and f.attr == "add_argument"):
            continue
        assert isinstance(node, ast.Call)
        dest_kw = keyword(node, "dest")
        if dest_kw is not None:
            if sf.names.const_str(dest_kw) == dest:
                out.append(node)
        elif flags & {sf.names.const_str(a) for a in node.args}:
            out.append(node)
    return out


def add_argument(sf: SourceFile, dest: str) -> ast.Call | None:
    """The first `add_argument` call for `dest`, if any."""
    calls = add_arguments(sf, dest)
    return calls[0] if calls else None


def off_unless_given(sf: SourceFile, receiver: ast.expr, dest: str) -> bool:
    """`receiver.dest` is a flag of this module's parser that is off unless the user passes it:
    the receiver is bound once to `parser.parse_args()` (no argument list of its own), every
    `add_argument` for it is `action="store_true"` (default False) or has `default=False`, and
    nothing turns it on in the code (`set_defaults(dest=...)`, an assignment to `.dest`,
    `sys.argv` edits)."""
    if not (isinstance(receiver, ast.Name) and _parsed_args(sf, receiver.id)):
        return False
    calls = add_arguments(sf, dest)
    if not calls or not all(_off(sf, c) for c in calls):
        return False
    return not _turned_on(sf, dest)


def _parsed_args(sf: SourceFile, name: str) -> bool:
    value = sf.names.bound_once(name)
    return (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr == "parse_args"
        and not value.args
        and not value.keywords
    )


def _off(sf: SourceFile, call: ast.Call) -> bool:
    default = keyword(call, "default")
    action = keyword(call, "action")
    if action is not None and sf.names.const_str(action) == "store_true":
        return default is None or (isinstance(default, ast.Constant) and default.value is False)
    return isinstance(default, ast.Constant) and default.value is False and action is None


def _turned_on(sf: SourceFile, dest: str) -> bool:
    if b"sys.argv" in sf.data:
        return True
    for node in ast.walk(sf.tree) if sf.tree is not None else ():
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "set_defaults"
            and keyword(node, dest) is not None
        ):
            return True
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Attribute) and t.attr == dest for t in targets):
                return True
    return False
