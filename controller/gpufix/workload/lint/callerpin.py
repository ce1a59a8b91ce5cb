"""A function that runs only after its caller pinned the process to one GPU.

I-JEPA's launcher (facebookresearch/ijepa main.py, process_main) starts one process per rank;
each first sets `CUDA_VISIBLE_DEVICES` to that rank's device (`devices[rank]`) and then calls
`src.train.main`, which uses `cuda:0`. CUDA numbers the visible devices from 0 (CUDA C
Programming Guide, "CUDA Environment Variables"), so there `cuda:0` is each rank's own GPU.

A top-level function counts as pinned when every place the run refers to it is a call in a
function whose body, before that call and at its own top level, writes CUDA_VISIBLE_DEVICES a
value that is not a constant and not a list of several GPUs (`visible.shared_list`). A reference
of any other kind (`mp.spawn(main)`, `target=main`, a call without the write, a write under an
`if` or after the call, an entry point string `pkg.train:main` in a file of the run) leaves it
unpinned. Not seen: `getattr(module, "main")` and entry points outside the run's Python files.
"""

from __future__ import annotations

import ast
from typing import cast

from gpufix.nccl_env import CUDA_VISIBLE_DEVICES

from .callsites import all_env_writes
from .project import Project, SourceFile
from .prune import nodes_on
from .stmts import nodes_below
from .visible import shared_list


def pinned_by_callers(project: Project, sf: SourceFile, top: str) -> bool:
    """Every reference to `sf`'s top-level function `top` is a call after a per-process pin."""
    key = f"pinned-by-callers:{top}"
    cached = sf.cache.get(key)
    if cached is None:
        cached = sf.cache[key] = _pinned(project, sf, top)
    return bool(cached)


def _pinned(project: Project, sf: SourceFile, top: str) -> bool:
    if top not in sf.defs:
        return False
    if not any(f.mentions(top) for f in _holding(project, b"VISIBLE_DEVICES")):
        return False  # no file that could pin the variable names the function
    stem = sf.module.rsplit(".", 1)[-1]
    entry = f"{stem}:{top}"
    if any(f.mentions(entry) for f in _holding(project, b"entry_points")):
        return False  # a console-script entry point (`train = src.train:main`) calls it unpinned
    found = False
    for f in [sf, *_importers(project, sf, top)]:
        if _reexported(project, f, sf, top):
            return False
        for call, func in _references(project, f, sf, top):
            if call is not None and _cannot_bind(sf.defs[top], call):
                continue  # raises TypeError before the function runs
            if call is None or func is None or not _pin_before(f, func, call):
                return False
            found = True
    return found


def _importers(project: Project, sf: SourceFile, top: str) -> list[SourceFile]:
    """Files that may refer to the function: they name it, and name its module (an import of
    any form: `from src.train import main` in a folder without __init__.py too) or import by
    string (`importlib.import_module`). _references then resolves each name exactly."""
    stem = sf.module.rsplit(".", 1)[-1]
    by_string = {id(f) for n in (b"import_module", b"__import__") for f in _holding(project, n)}
    return [
        f
        for f in _holding(project, top.encode())
        if f is not sf and (f.mentions(stem) or id(f) in by_string)
    ]


def _reexported(project: Project, f: SourceFile, sf: SourceFile, top: str) -> bool:
    """A package's __init__.py imports the function: callers may reach it as `pkg.main`."""
    if not f.rel.endswith("__init__.py"):
        return False
    return any(project.split(f, v) == (sf, [top]) for v in f.names.imports.values())


def _holding(project: Project, needle: bytes) -> list[SourceFile]:
    key = "holding:" + needle.decode()
    cached = project.cache.get(key)
    if cached is None:
        cached = project.cache[key] = [f for f in project.parsed() if needle in f.data]
    return cast(list[SourceFile], cached)


def _references(
    project: Project, f: SourceFile, sf: SourceFile, top: str
) -> list[tuple[ast.Call | None, ast.FunctionDef | ast.AsyncFunctionDef | None]]:
    """For each reference in `f` to `sf`'s function `top`: the call it is the callee of (or
    None) and the function it sits in (or None)."""
    bound = {**f.names.imports, **f.names.aliases}
    words = (top, *sorted(n for n, v in bound.items() if v.rsplit(".", 1)[-1] == top))
    out: list[tuple[ast.Call | None, ast.FunctionDef | ast.AsyncFunctionDef | None]] = []
    for stmt, where in nodes_on(f, words):
        below = nodes_below(stmt)
        callees = {id(n.func): n for n in below if isinstance(n, ast.Call)}
        for n in below:
            if isinstance(n, ast.Name | ast.Attribute) and _names(project, f, n, sf, top):
                out.append((callees.get(id(n)), _innermost(f, where.owners)))
    return out


def _cannot_bind(target: ast.stmt, call: ast.Call) -> bool:
    """The call leaves out a required argument, or passes too many: Python raises TypeError
    before the function's body runs (a `main()` under `__main__` for `def main(args)`)."""
    if not isinstance(target, ast.FunctionDef | ast.AsyncFunctionDef):
        return False
    if any(isinstance(a, ast.Starred) for a in call.args) or any(
        k.arg is None for k in call.keywords
    ):
        return False
    a = target.args
    positional = [*a.posonlyargs, *a.args]
    required = positional[: len(positional) - len(a.defaults)]
    given = {k.arg for k in call.keywords}
    missing = [p for p in required[len(call.args) :] if p.arg not in given]
    kwonly = [
        p
        for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True)
        if d is None and p.arg not in given
    ]
    return bool(missing or kwonly) or (len(call.args) > len(positional) and a.vararg is None)


def _names(project: Project, f: SourceFile, n: ast.AST, sf: SourceFile, top: str) -> bool:
    resolved = f.names.resolve(n)
    if resolved is None or resolved.rsplit(".", 1)[-1] != top:
        return False
    hit = project.split(f, resolved)
    return hit is not None and hit[0] is sf and hit[1] == [top]


def _innermost(
    f: SourceFile, owners: tuple[str, ...]
) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The function the owners path ends in (module-level functions and their nested ones)."""
    body: list[ast.stmt] = f.tree.body if f.tree is not None else []
    node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | None = None
    for name in owners:
        node = next((s for s in body if isinstance(s, _DEFS) and s.name == name), None)
        if node is None:
            return None
        body = node.body
    return node if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) else None


_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _pin_before(
    f: SourceFile, func: ast.FunctionDef | ast.AsyncFunctionDef, call: ast.Call
) -> bool:
    """A top-level statement of `func` before the one holding `call` writes a per-process
    CUDA_VISIBLE_DEVICES."""
    at = next(
        (i for i, s in enumerate(func.body) if s.lineno <= call.lineno <= (s.end_lineno or 0)),
        None,
    )
    if at is None:
        return False
    earlier = {id(s) for s in func.body[:at]}
    earlier |= {id(s.value) for s in func.body[:at] if isinstance(s, ast.Expr)}
    return any(
        w.key == CUDA_VISIBLE_DEVICES
        and id(node) in earlier
        and w.value is not None
        and f.names.const_str(w.value) is None
        and not shared_list(f, w.value)
        for w, node, _ in all_env_writes(f)
    )
