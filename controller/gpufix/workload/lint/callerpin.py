"""A function that runs only after its caller pinned the process to one GPU.

I-JEPA's launcher (facebookresearch/ijepa main.py, process_main) starts one process per rank;
each first sets `CUDA_VISIBLE_DEVICES` to that rank's device (`devices[rank]`) and then calls
`src.train.main`, which uses `cuda:0`. CUDA numbers the visible devices from 0 (CUDA C
Programming Guide, "CUDA Environment Variables"), so there `cuda:0` is each rank's own GPU.

The reading fails closed: a top-level function or class (without decorators) counts as pinned
only when every name in the run that may stand for it is a call in a function that
- writes CUDA_VISIBLE_DEVICES as its first statement (nothing before it can have started CUDA),
  and names the variable nowhere else (no second write, `del` or read), with a value indexed by
  one of its parameters (`devices[rank]`), not a constant, a `setdefault`, a join or a known list;
- is itself run once per process: every name for it is a process target (`Process(target=...)`,
  `spawn`, `start_processes`), but for at most one call in module-level code outside any loop
  (the one-GPU path).
A name that cannot be resolved (a star import, a name bound twice, `obj.main`, a re-export, a
`sys.path` import, `getattr(module, "main")`, `vars(module)["main"]`, `getattr` by a computed
name in a file that names the module), a call of `exec` or `eval` in a file that names it, an
entry-point string `pkg.train:main` in the code, and a file around the code that names the
function (sidefiles.py: `[project.scripts]` in pyproject.toml, `console_scripts` in setup.cfg, a
config's `_target_: pkg.train.main`, a notebook's `from pkg.train import main`) keep the
finding. Not seen: identifiers written with compatibility characters (NFKC).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import cast

from gpufix.nccl_env import CUDA_VISIBLE_DEVICES

from .project import Project, SourceFile
from .rankcode import names_in
from .sidefiles import side_index
from .visible import shared_list

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_LOOPS = (ast.For, ast.AsyncFor, ast.While, ast.comprehension, ast.Lambda)
_STARTS = frozenset({"spawn", "start_processes"})  # the function is the first argument


@dataclass(frozen=True)
class _Use:
    kind: str  # "call", "process" (a process target) or "other"
    node: ast.AST  # the call, or the name itself
    func: ast.FunctionDef | ast.AsyncFunctionDef | None  # the function it sits in
    in_loop: bool
    file: SourceFile


def pinned_by_callers(project: Project, sf: SourceFile, top: str) -> bool:
    """Every name for `sf`'s top-level `top` is a call after a per-process pin."""
    key = f"pinned-by-callers:{top}"
    cached = sf.cache.get(key)
    if cached is None:
        cached = sf.cache[key] = _pinned(project, sf, top)
    return bool(cached)


def _pinned(project: Project, sf: SourceFile, top: str) -> bool:
    target = sf.defs.get(top)
    if not isinstance(target, _DEFS) or target.decorator_list:
        return False  # a decorator holds the function: where it is called is not seen
    pinners = [f for f in project.holding(b"VISIBLE_DEVICES") if f.mentions(top)]
    if not any(_starts_with_pin(d) for f in pinners for d in f.defs.values()):
        return False  # no function of a file that names it starts by pinning the variable
    uses = _uses(project, sf, top)
    if uses is None or not uses:
        return False
    pinned = 0
    for use in uses:
        if use.kind == "call" and _cannot_bind(target, cast(ast.Call, use.node)):
            continue  # raises TypeError before the function runs
        if use.kind != "call" or use.func is None:
            return False
        if not _pin_before(use.file, use.func, use.node):
            return False
        if not _once_per_process(project, use.file, use.func):
            return False
        pinned += 1
    return pinned > 0


def _uses(project: Project, sf: SourceFile, top: str) -> list[_Use] | None:
    """Every name in the run that may stand for `sf`'s `top`; None when one cannot be told
    apart (it may be the function, and is not known to be something else)."""
    stem = sf.module.rsplit(".", 1)[-1]
    entry = re.compile(rb"\b%s\s*:\s*%s\b" % (re.escape(stem.encode()), re.escape(top.encode())))
    if any(entry.search(f.data) for f in project.holding(top.encode())):
        return None  # a console-script entry point (`train = src.train:main`, `src.train : main`)
    if _named_around(project, stem, top):
        return None  # pyproject.toml, setup.cfg, a config, a notebook or a launcher names both
    if any(_dynamic(f, stem) for f in project.holding(b"getattr(")):
        return None
    out: list[_Use] = []
    for f in project.holding(top.encode()):
        bound = {**f.names.imports, **f.names.aliases}
        aliases = {n for n, v in bound.items() if v.rsplit(".", 1)[-1] == top}
        for n, use in _walk(f):
            if use.kind == "call" and isinstance(n, ast.Name) and n.id in ("exec", "eval"):
                return None  # code from a string may name it
            if isinstance(n, ast.Subscript) and getattr(n.slice, "value", None) == top:
                return None  # vars(module)["main"], globals()["main"]
            if use.kind == "call" and isinstance(n, ast.Name) and n.id == "getattr":
                args = cast(ast.Call, use.node).args
                if len(args) > 1 and getattr(args[1], "value", None) == top:
                    return None  # getattr(module, "main")
            if not isinstance(n, ast.Name | ast.Attribute):
                continue
            if _last(n) != top and not (isinstance(n, ast.Name) and n.id in aliases):
                continue
            if isinstance(getattr(n, "ctx", None), ast.Store | ast.Del):
                continue
            which = _stands_for(project, f, n, sf, top)
            if which is None:
                return None
            if which:
                out.append(use)
    return out


def _named_around(project: Project, stem: str, top: str) -> bool:
    """A file around the code names the module and the function together (any form: an entry
    point, a config target, `import src.train as t; t.main()` in a notebook or `python -c`), or
    there were too many such files to read."""
    index = side_index(project)
    if index is None:
        return True
    return bool(index.get(stem.encode(), frozenset()) & index.get(top.encode(), frozenset()))


def _dynamic(f: SourceFile, stem: str) -> bool:
    """The file names the module and looks names up by a computed string
    (`getattr(tasks, sys.argv[1])`, `getattr(importlib.import_module("src.train"), name)`)."""
    if not f.mentions(stem):
        return False
    return any(
        isinstance(n, ast.Name)
        and n.id == "getattr"
        and u.kind == "call"
        and len(cast(ast.Call, u.node).args) > 1
        and not isinstance(cast(ast.Call, u.node).args[1], ast.Constant)
        for n, u in _walk(f)
    )


def _starts_with_pin(func: ast.stmt) -> bool:
    """The function's first statement (after a docstring) writes CUDA_VISIBLE_DEVICES."""
    if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
        return False
    first = _first_statement(func)
    return (
        isinstance(first, ast.Assign)
        and len(first.targets) == 1
        and isinstance(first.targets[0], ast.Subscript)
        and getattr(first.targets[0].slice, "value", None) == CUDA_VISIBLE_DEVICES
    )


def _first_statement(func: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.stmt | None:
    """The function's first statement after its docstring."""
    body = func.body[1:] if ast.get_docstring(func) is not None else func.body
    return body[0] if body else None


def _last(n: ast.Name | ast.Attribute) -> str:
    return n.id if isinstance(n, ast.Name) else n.attr


def _stands_for(
    project: Project, f: SourceFile, n: ast.AST, sf: SourceFile, top: str
) -> bool | None:
    """True: the name is `sf`'s `top`; False: something else it is known to be (another
    definition of the run, a library's name); None: cannot tell."""
    resolved = f.names.resolve(n)
    if resolved is None:
        return None
    hit = project.split(f, resolved)
    if hit is None:
        first = resolved.split(".", 1)[0]
        return None if project.has_name(first) else False  # not a file of the run: a library
    other, rest = hit
    if other is sf and rest == [top]:
        return True
    return False if len(rest) == 1 and isinstance(other.defs.get(rest[0]), _DEFS) else None


def _walk(f: SourceFile) -> list[tuple[ast.AST, _Use]]:
    """Every node with how it is used: the call it is the callee of, the process it is the
    target of, or neither; the function it sits in; whether a loop repeats it."""
    cached = f.cache.get("callerpin-walk")
    if cached is not None:
        return cast(list[tuple[ast.AST, _Use]], cached)
    out: list[tuple[ast.AST, _Use]] = []
    stack: list[tuple[ast.AST, ast.FunctionDef | ast.AsyncFunctionDef | None, bool]] = []
    if f.tree is not None:
        stack.append((f.tree, None, False))
    while stack:
        node, func, loop = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            func, loop = node, False
        elif isinstance(node, _LOOPS):
            loop = True
        if isinstance(node, ast.Call):
            callee = node.func
            out.append((callee, _Use("call", node, func, loop, f)))
            name = _last_name(callee)
            for kw in node.keywords:
                if kw.arg == "target" and name.endswith("Process"):
                    out.append((kw.value, _Use("process", kw.value, func, loop, f)))
            if name in _STARTS and node.args:
                out.append((node.args[0], _Use("process", node.args[0], func, loop, f)))
        out.append((node, _Use("other", node, func, loop, f)))
        stack.extend((c, func, loop) for c in ast.iter_child_nodes(node))
    # the first use recorded for a node is the most specific (call or process)
    seen: set[int] = set()
    firsts = []
    for n, use in out:
        if id(n) not in seen:
            seen.add(id(n))
            firsts.append((n, use))
    f.cache["callerpin-walk"] = firsts
    return firsts


def _once_per_process(
    project: Project, f: SourceFile, func: ast.FunctionDef | ast.AsyncFunctionDef
) -> bool:
    """The pinning function is a top-level function every name for which is a process target
    or a call outside any loop: each process runs it once, before anything else uses CUDA."""
    if f.defs.get(func.name) is not func or func.decorator_list:
        return False
    uses = _uses(project, f, func.name)
    if not uses:
        return False
    calls = [u for u in uses if u.kind == "call"]
    if len(calls) > 1 or any(u.kind not in ("call", "process") for u in uses):
        return False
    # the one direct call (the one-GPU path) sits in module-level code, outside any loop
    return all(u.func is None and not u.in_loop for u in calls)


def _pin_before(f: SourceFile, func: ast.FunctionDef | ast.AsyncFunctionDef, call: ast.AST) -> bool:
    """A top-level statement of `func` before the one holding `call` is the function's one
    mention of CUDA_VISIBLE_DEVICES: a plain write of a value built from a parameter."""
    line = getattr(call, "lineno", 0)
    at = next((i for i, s in enumerate(func.body) if s.lineno <= line <= (s.end_lineno or 0)), None)
    if at is None:
        return False
    mentions = [
        n for n in ast.walk(func) if isinstance(n, ast.Constant) and n.value == CUDA_VISIBLE_DEVICES
    ]
    if len(mentions) != 1:
        return False  # written twice, deleted, read, or named through a constant
    params = {a.arg for a in [*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs]}
    first = _first_statement(func)  # nothing before it can have started CUDA
    for stmt in func.body[:at]:
        if stmt is not first or not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1:
            continue
        t = stmt.targets[0]
        if not (isinstance(t, ast.Subscript) and t.slice is mentions[0]):
            continue
        value = stmt.value
        indexed = [n for n in ast.walk(value) if isinstance(n, ast.Subscript)]
        return (
            f.names.is_environ(t.value)
            and any(params & set(names_in(n.slice)) for n in indexed)  # devices[rank]
            and _last_name(value.func if isinstance(value, ast.Call) else value) != "join"
            and not shared_list(f, value)
        )
    return False


def _last_name(func: ast.expr) -> str:
    return _last(func) if isinstance(func, ast.Name | ast.Attribute) else ""


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
