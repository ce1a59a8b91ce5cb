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

from .callsites import DISTRIBUTED, FABRIC, named
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
    either the function around it makes its caller a rank and starts no process, or the module
    is a rank, starts no process and no module of the run imports it (a launcher that calls it,
    then starts the ranks, hands them the value)."""
    line = _torch_line(sf)
    if line is None or getattr(node, "lineno", 0) <= line:
        return False
    if _rank_function(sf, node):
        return True
    return bool(named(sf, _RANK)) and not _starts_process(sf) and not imported_in_run(project, sf)


def _rank_function(sf: SourceFile, node: ast.AST) -> bool:
    """The innermost function around the write builds the rank itself (its own body, not a
    nested def, calls one of `_RANK`) and nothing in it starts a process. Whoever runs it has
    imported this module, so torch, and becomes a rank: a launcher that calls a helper, then
    starts the ranks, calls no such function (subjectmotion's `launch_training_task`, which
    builds its Accelerator; an `mp.spawn` target that wraps DDP)."""
    fn = _enclosing_function(sf.tree, node)
    if fn is None:
        return False
    names = [sf.names.resolve(c.func) or "" for c in _own_calls(fn)]
    every = [sf.names.resolve(c.func) or "" for c in ast.walk(fn) if isinstance(c, ast.Call)]
    return any(n in _RANK for n in names) and not any(_starts(n) for n in every)


def _enclosing_function(
    tree: ast.Module | None, node: ast.AST
) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    line = getattr(node, "lineno", 0)
    around = [
        fn
        for fn in (ast.walk(tree) if tree is not None else ())
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef)
        and fn.body[0].lineno <= line <= (fn.end_lineno or 0)
    ]
    return max(around, key=lambda fn: fn.body[0].lineno, default=None)  # the innermost


def _own_calls(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.Call]:
    """The calls of `fn`'s body, not those of functions, lambdas or classes defined in it."""
    out: list[ast.Call] = []
    todo: list[ast.AST] = list(fn.body)
    while todo:
        n = todo.pop()
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            continue
        if isinstance(n, ast.Call):
            out.append(n)
        todo.extend(ast.iter_child_nodes(n))
    return out


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
    cached = sf.cache.get("starts-process")
    if cached is None:
        cached = any(
            isinstance(n, ast.Call) and _starts(sf.names.resolve(n.func) or "")
            for n in (ast.walk(sf.tree) if sf.tree is not None else ())
        )
        sf.cache["starts-process"] = cached
    return bool(cached)
