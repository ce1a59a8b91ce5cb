"""Where a TORCH_DISTRIBUTED_DEBUG write reaches nobody (GPF003).

torch.distributed reads the variable once, when it is imported: its __init__ calls
set_debug_level_from_env() (since PyTorch 1.12, pytorch/pytorch#73166), and `import torch`
imports torch.distributed. A write that runs after the module imported torch therefore leaves
this process at the level it started with (checked on torch 2.13: get_debug_level() stays OFF
and init_process_group builds no debug wrapper). A process started afterwards inherits the
variable and reads it when it imports torch itself, so a module that starts processes keeps the
finding, and so does one whose ranks a library starts (a Lightning Trainer or Fabric under
DDP runs the script again for each rank, lightning_fabric/strategies/launchers/
subprocess_script.py, where the inherited variable is read at import).

Read strictly: the module is a rank itself (it starts the process group, wraps a model in
DDP/FSDP or builds accelerate's or DeepSpeed's engine, as a launcher such as torchrun starts
it), imports torch in a statement of its top level (no `if`, `try` or function around it) on an
earlier line than the write, calls nothing that starts a process, and is imported by no module
of the run (a launcher that imports it may call the write, then start the ranks); or, whatever
the module does, the function around the write builds the rank in its own body and starts no
process. Older torch (before 1.12) read the variable later, which this cannot see.
"""

from __future__ import annotations

import ast
import fnmatch
from typing import Any, cast

from .callsites import DISTRIBUTED, FABRIC, CallSite, importers, named, one_rank_group
from .communicators import imported_in_run
from .project import Project, SourceFile

# Calls that make the module a rank that a launcher started (torchrun, deepspeed, accelerate
# launch); not torch.multiprocessing.spawn or Fabric, which start the ranks themselves.
_RANK = DISTRIBUTED - FABRIC - {"torch.multiprocessing.spawn"}

# Calls that start a process, which imports torch again (Python's os, subprocess,
# multiprocessing and concurrent.futures docs; torch.multiprocessing; torchrun's modules).
_STARTS = (
    "multiprocessing.*", "torch.multiprocessing.*", "concurrent.futures.ProcessPoolExecutor",
    "subprocess.*", "os.system", "os.popen", "os.exec*", "os.spawn*", "os.posix_spawn*",
    "torch.distributed.run.*", "torch.distributed.launch*", "torch.distributed.launcher.*",
    "torch.distributed.elastic.*", "asyncio.create_subprocess_*", "pty.spawn",
)  # fmt: skip


def read_already(project: Project, sf: SourceFile, node: ast.AST) -> bool:
    """The write `node` runs after its module imported torch, and no process reads it later:
    either the function around it makes its caller a rank and nothing in the module or its
    importers starts a process but with that function as the target, or the module is a rank,
    starts no process and no module of the run imports it (a launcher that calls it, then starts
    the ranks, hands them the value). Not where the module asks torch to read it again."""
    line = _torch_line(sf)
    if line is None or getattr(node, "lineno", 0) <= line or _reads_again(sf):
        return False
    if _rank_function(project, sf, node):
        return True
    return bool(named(sf, _RANK)) and not _starts_process(sf) and not imported_in_run(project, sf)


def _reads_again(sf: SourceFile) -> bool:
    """`torch.distributed.set_debug_level_from_env()` reads the variable again, after the write."""
    return any(
        (sf.names.resolve(n.func) or "").endswith(".set_debug_level_from_env")
        for n in (ast.walk(sf.tree) if sf.tree is not None else ())
        if isinstance(n, ast.Call)
    )


def _rank_function(project: Project, sf: SourceFile, node: ast.AST) -> bool:
    """The function around the write builds the rank whenever the write runs (one of `_RANK`
    in the write's own block or a block around it, up to the function's body, a `try` or `with`
    body included, not under an `if` or a loop; not a group of one rank), and no process is
    started by this module or a module that imports it (up to three steps away: a launcher that
    imports a package that imports it) but with that function as the target
    (`mp.spawn(train)`: the children imported torch with the module). Whoever runs the function
    then is a rank that read the variable already (subjectmotion's `launch_training_task`, which
    builds its Accelerator; ai-generated-ai's spawn target, which wraps DDP)."""
    fn = _enclosing_function(sf.tree, node)
    if fn is None:
        return False
    builds = any(
        name in _RANK and not one_rank_group(CallSite(c, name, (), ()))
        for block in _blocks(fn, node)
        for c in _unconditional_calls(block)
        for name in [sf.names.resolve(c.func) or ""]
    )
    target = f"{sf.module}.{fn.name}" if sf.module else fn.name
    others = [sf, *importers(project, sf)]
    return builds and not any(_starts_other_than(m, fn.name, target) for m in others)


def _enclosing_function(
    tree: ast.Module | None, node: ast.AST
) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The def whose body holds the write; None for a write in a lambda, a default argument or
    a decorator (evaluated elsewhere or whenever)."""
    parents = _parents(tree)
    child = node
    while id(child) in parents:
        parent = parents[id(child)]
        if isinstance(parent, ast.Lambda):
            return None
        if isinstance(parent, ast.FunctionDef | ast.AsyncFunctionDef):
            return parent if any(child is b for b in parent.body) else None
        child = parent
    return None


def _blocks(fn: ast.FunctionDef | ast.AsyncFunctionDef, node: ast.AST) -> list[list[ast.stmt]]:
    """The statement lists from the one holding the write up to the function's body: each runs
    whenever the write does (an early return or an exception aside)."""
    out: list[list[ast.stmt]] = []
    for holder in ast.walk(fn):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(holder, field, None)
            if isinstance(block, list) and any(_holds(stmt, node) for stmt in block):
                out.append(block)
    return out


def _holds(stmt: ast.AST, node: ast.AST) -> bool:
    return any(n is node for n in ast.walk(stmt))


def _parents(tree: ast.Module | None) -> dict[int, ast.AST]:
    return {
        id(child): parent
        for parent in (ast.walk(tree) if tree is not None else ())
        for child in ast.iter_child_nodes(parent)
    }


def _unconditional_calls(body: list[ast.stmt]) -> list[ast.Call]:
    """Calls of these statements that run whenever the block does: not inside a def, lambda or
    class, an `if`, a loop, a `match` or an `except`."""
    out: list[ast.Call] = []
    for stmt in body:
        if isinstance(stmt, ast.Try | ast.TryStar):
            out += _unconditional_calls([*stmt.body, *stmt.finalbody])
        elif isinstance(stmt, ast.With | ast.AsyncWith):
            out += _own_calls(stmt.items) + _unconditional_calls(stmt.body)
        elif not isinstance(stmt, _BRANCHES):
            out += _own_calls([stmt])
    return out


_BRANCHES = (
    ast.If, ast.For, ast.AsyncFor, ast.While, ast.Match,
    ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
)  # fmt: skip


def _own_calls(nodes: list[Any]) -> list[ast.Call]:
    """The calls in these nodes, not those of the defs, lambdas and classes among them."""
    out: list[ast.Call] = []
    todo: list[ast.AST] = list(nodes)
    while todo:
        n = todo.pop()
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            continue
        if isinstance(n, ast.Call):
            out.append(n)
        todo.extend(ast.iter_child_nodes(n))
    return out


def _starts_other_than(sf: SourceFile, name: str, dotted: str) -> bool:
    """A call of the module starts a process whose target is not the function `dotted` (`name`
    in its own module, or a name that resolves to it in an importer)."""
    for n in _process_starts(sf):
        given = [*n.args[:1], *(k.value for k in n.keywords if k.arg in ("fn", "target"))]
        if not any(_is_target(sf, a, name, dotted) for a in given):
            return True
    return False


def _is_target(sf: SourceFile, arg: ast.expr, name: str, dotted: str) -> bool:
    resolved = sf.names.resolve(arg)
    if resolved is None:
        return isinstance(arg, ast.Name) and arg.id == name
    return resolved == dotted or resolved.split(".")[-2:] == dotted.split(".")[-2:]


def _starts(name: str) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in _STARTS)


def _torch_line(sf: SourceFile) -> int | None:
    for stmt in sf.tree.body if sf.tree is not None else ():
        if isinstance(stmt, ast.Import) and any(_torch(a.name) for a in stmt.names):
            return stmt.lineno
        if isinstance(stmt, ast.ImportFrom) and not stmt.level and _torch(stmt.module or ""):
            return stmt.lineno
    return None


def _torch(module: str) -> bool:
    return module == "torch" or module.startswith("torch.")


def _starts_process(sf: SourceFile) -> bool:
    return bool(_process_starts(sf))


def _process_starts(sf: SourceFile) -> list[ast.Call]:
    """The module's calls that start a process (`_STARTS`), walked once per module."""
    cached = sf.cache.get("process-starts")
    if cached is None:
        cached = [
            n
            for n in (ast.walk(sf.tree) if sf.tree is not None else ())
            if isinstance(n, ast.Call) and _starts(sf.names.resolve(n.func) or "")
        ]
        sf.cache["process-starts"] = cached
    return cast(list[ast.Call], cached)
