"""GPF001: CUDA_VISIBLE_DEVICES / CUDA_DEVICE_ORDER written after torch or a CUDA library loaded.

Three walks, all with the flow walker:
- each module that writes the variables, or calls a function that does, in execution order;
- each function that writes them (or calls one that does) as its callers see it: after its
  module was imported, with that module's imports loaded, unless every call of it was already
  followed at module level (a set-up function called before the imports);
- callers in other modules reach the writes through the call graph.
"""

from __future__ import annotations

import ast
import os
import re
from typing import cast

from gpufix.nccl_env import CUDA_INIT_VARS, CUDA_VISIBLE_DEVICES

from ..calls import CallTarget, Scope
from ..callsites import all_env_writes
from ..envwrites import walk_here, writes_in
from ..flow import FlowWalker
from ..loads import State
from ..model import Related
from ..names import WORDS
from ..project import Project, SourceFile
from ..prune import nodes_on, segment
from ..report import Reporter
from ..stmts import Where, calls_in
from ..unused import in_unused_top
from . import Check, CheckContext

# Bytes a file must hold to be read for the variables: parts of their names, so that a key
# built with `+` or an f-string ("CUDA_VISIBLE_" + "DEVICES") is read too.
TRIGGERS = (b"VISIBLE", b"DEVICE_ORDER", b"CUDA_DEVICE")
_ROUNDS = 4  # how far "calls a function that writes" is followed across the call graph
# torch.cuda calls that create the CUDA context (each runs torch.cuda._lazy_init): after one of
# them the variables were read. Not is_available()/device_count(): on torch 2.x they leave
# CUDA_VISIBLE_DEVICES unread (docs/lint.md's H200 table; pytorch#23544 saw the opposite on 1.1).
CUDA_STARTS = frozenset(
    f"torch.cuda.{name}"
    for name in (
        "init", "set_device", "current_device", "get_device_name", "get_device_properties",
        "get_device_capability", "mem_get_info",
    )
)  # fmt: skip


_STARTS_WORDS = (b"init(", b"set_device", b"current_device", b"get_device_", b"mem_get_info")
_BLOCKS = ("body", "orelse", "finalbody")
_COMPOUND = (
    ast.If, ast.For, ast.AsyncFor, ast.While, ast.Try, ast.TryStar, ast.With, ast.AsyncWith, ast.Match,
    ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
)  # fmt: skip


def _parents(sf: SourceFile) -> dict[int, tuple[ast.AST, list[ast.stmt], int]]:
    """Statement -> (the node holding its block, the block, its index there), once per file."""
    cached = sf.cache.get("stmt-parents")
    if cached is None:
        found: dict[int, tuple[ast.AST, list[ast.stmt], int]] = {}
        for node in ast.walk(sf.tree) if sf.tree else ():
            for field in _BLOCKS:
                block = getattr(node, field, None)
                if isinstance(block, list):
                    for i, stmt in enumerate(block):
                        found[id(stmt)] = (node, block, i)
        sf.cache["stmt-parents"] = cached = found
    return cached  # type: ignore[return-value]


def _started_before(sf: SourceFile, node: ast.AST) -> ast.Call | None:
    """A torch.cuda call that creates the CUDA context and runs on every path before the
    statement: in a simple statement earlier in its block or an enclosing block of the same
    function (not in another branch, a loop or a `try`). The write then certainly comes too
    late."""
    if not any(w in sf.data for w in _STARTS_WORDS):
        return None
    parents = _parents(sf)
    found: ast.Call | None = None
    here = parents.get(id(node))
    while here is not None:
        holder, block, index = here
        for stmt in block[:index]:
            if isinstance(stmt, _COMPOUND):
                continue
            for n in walk_here(stmt):
                if isinstance(n, ast.Call) and sf.names.resolve(n.func) in CUDA_STARTS:
                    found = found or n
        if isinstance(holder, ast.FunctionDef | ast.AsyncFunctionDef | ast.Module):
            break
        if isinstance(holder, ast.Try | ast.TryStar | ast.For | ast.AsyncFor | ast.While):
            break  # the statement may run without what came before inside them
        here = parents.get(id(holder))
    return found


def _restores(sf: SourceFile, stmt: ast.AST, key: str, value: ast.expr | None) -> bool:
    """`os.environ[key] = old` where `old` is bound once, to a read of the same variable
    (`old = os.environ.get(key)`), in the function the write sits in (else in the module): the
    value the process had is put back, which changes no device selection (vLLM's
    guard_cuda_initialization; a trainer that saves and restores around its DataLoader loop in
    two methods under one name; both judged FP)."""
    if not isinstance(value, ast.Name):
        return False
    func = _enclosing_function(sf, stmt)
    if func is not None and _binds(func, value.id):
        return _reads(sf, _bound_once_in(func, value.id), key)
    return _reads(sf, _module_bound_once(sf, value.id), key)  # a global


def _enclosing_function(
    sf: SourceFile, stmt: ast.AST
) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    parents = _parents(sf)
    here = parents.get(id(stmt))
    while here is not None:
        holder = here[0]
        if isinstance(holder, ast.FunctionDef | ast.AsyncFunctionDef):
            return holder
        here = parents.get(id(holder))
    return None


def _own_nodes(func: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.AST]:
    """The function's parameters and body, without nested defs, lambdas and classes (their
    names are theirs, not the function's)."""
    return [*ast.walk(func.args), *_scope_nodes(func.body)]


def _scope_nodes(body: list[ast.stmt]) -> list[ast.AST]:
    """Every node of these statements that runs in their own scope: a nested def, lambda or
    class (the statement itself too) is skipped."""
    defs = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return [n for stmt in body if not isinstance(stmt, defs) for n in walk_here(stmt)]


def _module_bound_once(sf: SourceFile, name: str) -> ast.expr | None:
    """The value of the module's one top-level `name = value` (not a function's own name of
    the same spelling); None when module code binds it otherwise or more than once."""
    return _one_assignment(_scope_nodes(sf.tree.body), name) if sf.tree is not None else None


def _bound_once_in(func: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> ast.expr | None:
    """The value of the function's one binding of `name`, a plain `name = value`; None when it
    binds the name otherwise or more than once (a loop target, `+=`, a parameter, global)."""
    return _one_assignment(_own_nodes(func), name)


def _binds(func: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> bool:
    """The function binds the name (or declares it global or nonlocal)."""
    return any(_binding(n, name) for n in _own_nodes(func))


def _binding(n: ast.AST, name: str) -> bool:
    return (
        (isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Load))
        or (isinstance(n, ast.Global | ast.Nonlocal) and name in n.names)
        or (isinstance(n, ast.arg) and n.arg == name)
    )


def _one_assignment(nodes: list[ast.AST], name: str) -> ast.expr | None:
    """The value of the one binding of `name` among these nodes when it is a plain
    `name = value`; None when it is bound otherwise, more than once or not at all."""
    stores = [n for n in nodes if _binding(n, name)]
    if len(stores) != 1:
        return None
    for n in nodes:
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and n.targets[0] is stores[0]:
            return n.value
    return None


def _reads(sf: SourceFile, node: ast.expr | None, key: str) -> bool:
    """`os.environ.get(key)`, `os.environ[key]`, `os.getenv(key)`."""
    if isinstance(node, ast.Subscript):
        return sf.names.is_environ(node.value) and sf.names.const_str(node.slice) == key
    if not isinstance(node, ast.Call) or not node.args:
        return False
    if sf.names.const_str(node.args[0]) != key:
        return False
    f = node.func
    if isinstance(f, ast.Attribute) and f.attr == "get" and sf.names.is_environ(f.value):
        return True
    return sf.names.resolve(f) == "os.getenv"


# Calls that start training processes that read CUDA_VISIBLE_DEVICES when they start: Ray's
# local node counts its GPUs from it (https://docs.ray.io/en/latest/ray-core/scheduling/
# accelerators.html), torch.multiprocessing.spawn/start_processes start children by "spawn"
# (https://pytorch.org/docs/stable/multiprocessing.html), and a subprocess or os.system runs
# a fresh program. multiprocessing.Process/Pool are left out: on Linux they fork by default, and
# a forked child cannot use CUDA ("CUDA in multiprocessing", PyTorch notes).
_FRESH_STARTS = (
    "ray.init",
    "torch.multiprocessing.spawn",
    "torch.multiprocessing.start_processes",
)
_COMMANDS = ("subprocess.", "os.system")
# A command that runs training (not `git`, `nvidia-smi`, `cp`): a Python program or launcher.
_TRAINING = re.compile(r"python|torchrun|deepspeed|accelerate|\.py\b|\.sh\b|sys\.executable")


def _for_children(sf: SourceFile, node: ast.AST, key: str, value: ast.expr | None) -> bool:
    """The write's next simple statement (other environment writes aside) starts training
    processes: the value is for them, and they read it when they start (RLGL's
    `ray.init`, judged FP). Only a simple statement whose own call starts them counts, never a
    `def`, an `if` or a loop that holds one; the parent's own later GPU use is not followed.
    One loop counts: a loop over a DataLoader right after a write that hides every GPU (`""`,
    `"-1"`) and that the function later undoes with a restore of the saved value: the GPUs are
    hidden for the workers the loop starts, not for the process (a permanent blank write is the
    CPU-forcing kind, and stays reported)."""
    here = _parents(sf).get(id(node))
    if here is None:
        return False
    _, block, index = here
    for stmt in block[index + 1 :]:
        if isinstance(stmt, ast.For | ast.AsyncFor):
            return (
                _hides_every_gpu(sf, key, value)
                and _over_loader(sf, stmt.iter)
                and _restored_after(sf, node, key)
            )
        if isinstance(stmt, _COMPOUND):
            return False
        if writes_in(sf.names, [stmt]):
            continue
        call = _top_call(stmt)
        if call is None:
            return False
        name = sf.names.resolve(call.func) or ""
        if name.startswith(_FRESH_STARTS):
            return True
        return name.startswith(_COMMANDS) and bool(_TRAINING.search(segment(sf, call)))
    return False


# Values that leave a process no GPU: an empty list, or an index no GPU has (CUDA stops at the
# first invalid one: CUDA C Programming Guide, "CUDA Environment Variables").
_NO_GPU = frozenset({"", "-1"})
# Calls a loop's iterable may pass through: the loop still iterates the DataLoader.
_PASS_THROUGH = frozenset({"enumerate", "iter", "tqdm"})


def _worker_init_only(project: Project, sf: SourceFile, stmt: ast.AST) -> bool:
    """The write sits in a module-level function that the run names only as the
    `worker_init_fn=` of torch's DataLoader: it runs in each worker process as it starts, before
    the worker loads data (https://pytorch.org/docs/stable/data.html, `worker_init_fn`), not in
    the process that trains. An import under another name, any other use or a string that
    names it keeps the finding."""
    func = _enclosing_function(sf, stmt)
    if func is None or sf.defs.get(func.name) is not func:
        return False
    name, handed = func.name, 0
    for f in project.holding(func.name.encode()):
        passed: set[int] = set()
        for n in ast.walk(f.tree) if f.tree is not None else ():
            if isinstance(n, ast.Call) and _is_dataloader(f, n):
                passed.update(id(k.value) for k in n.keywords if k.arg == "worker_init_fn")
            elif isinstance(n, ast.alias) and n.name.rsplit(".", 1)[-1] == name and n.asname:
                return False  # imported under another name: its calls are not followed
            elif isinstance(n, ast.Name | ast.Attribute) and _last_name(n) == name:
                if id(n) not in passed or not isinstance(n.ctx, ast.Load):
                    return False
                handed += 1
            elif isinstance(n, ast.Constant) and n.value == name:
                return False  # named in a string: getattr, a registry, an entry point
    return handed > 0


def _is_dataloader(f: SourceFile, call: ast.Call) -> bool:
    """torch's DataLoader (it calls `worker_init_fn` only in its worker processes; with
    `num_workers=0` not at all)."""
    name = f.names.resolve(call.func) or ""
    return name.startswith("torch.") and name.endswith("DataLoader")


def _last_name(n: ast.Name | ast.Attribute) -> str:
    return n.id if isinstance(n, ast.Name) else n.attr


def _hides_every_gpu(sf: SourceFile, key: str, value: ast.expr | None) -> bool:
    """`CUDA_VISIBLE_DEVICES` set to a value that leaves no GPU (a blank CUDA_DEVICE_ORDER
    hides nothing)."""
    if key != CUDA_VISIBLE_DEVICES:
        return False
    text = sf.names.const_str(value) if value is not None else None
    return text is not None and text.strip() in _NO_GPU


def _restored_after(sf: SourceFile, write: ast.AST, key: str) -> bool:
    """A later write in the same function puts back the value saved from the same variable."""
    func = _enclosing_function(sf, write)
    if func is None:
        return False
    line = getattr(write, "lineno", 0)
    for n in _scope_nodes(func.body):
        if getattr(n, "lineno", 0) <= line or not isinstance(n, ast.stmt):
            continue
        for w in writes_in(sf.names, [n]):
            if w.key == key and _restores(sf, n, key, w.value):
                return True
    return False


def _over_loader(sf: SourceFile, it: ast.expr) -> bool:
    """`for b in train_loader`, `enumerate(self.val_dataloader)`, `tqdm(loader)`: iterating a
    DataLoader starts its worker processes ("each time an iterator of a DataLoader is created",
    https://pytorch.org/docs/stable/data.html#multi-process-data-loading). Told by the name's
    last word, `loader` or `dataloader`."""
    while isinstance(it, ast.Call) and it.args:
        f = it.func
        name = sf.names.resolve(f) or (f.id if isinstance(f, ast.Name) else "")
        if name.rsplit(".", 1)[-1] not in _PASS_THROUGH:
            return False
        it = it.args[0]
    name = it.attr if isinstance(it, ast.Attribute) else getattr(it, "id", "")
    words = WORDS.findall(name)
    return bool(words) and words[-1].lower() in ("loader", "dataloader")


def _top_call(stmt: ast.stmt) -> ast.Call | None:
    """The call a simple statement makes: `f(...)`, `x = f(...)`."""
    value = stmt.value if isinstance(stmt, ast.Expr | ast.Assign | ast.AnnAssign) else None
    return value if isinstance(value, ast.Call) else None


class _Listener:
    def __init__(self, reporter: Reporter, ctx: CheckContext) -> None:
        self.reporter = reporter
        self.ctx = ctx
        self.naming = {sf.path for sf in ctx.with_any(TRIGGERS)}  # checked, names a variable
        # The context of the caller whose walk this is, when not plain code: a helper in code
        # that an example calls too late is that example's finding (a note), not the code's.
        self.caller_context: str | None = None

    def on_statement(self, scope: Scope, node: ast.AST, state: State, note: str) -> None:
        sf = scope.sf
        if not state or sf.path not in self.naming:
            return
        for w in writes_in(sf.names, [node]):
            if w.key not in CUDA_INIT_VARS or in_unused_top(self.ctx.project, sf, w.node):
                continue
            if _restores(sf, node, w.key, w.value):
                continue
            first = next(iter(state.values()))
            where = f" in {note}" if note else ""
            started = _started_before(sf, node)
            if started is None and _for_children(sf, node, w.key, w.value):
                continue
            if _hides_every_gpu(sf, w.key, w.value) and _worker_init_only(
                self.ctx.project, sf, node
            ):
                continue
            if started is not None:
                call = segment(sf, started.func)
                self.reporter.add(
                    "GPF001",
                    sf,
                    w.node,
                    f"{w.key} set{where} after `{call}()` (line {started.lineno}) created the "
                    "CUDA context: it has no effect in this process; set it before the first "
                    "torch-based import or in the launch environment",
                    (
                        Related(
                            sf.path,
                            started.lineno,
                            sf.col(started.lineno, started.col_offset),
                            f"`{call}()` creates the CUDA context",
                        ),
                    ),
                    context=self.caller_context,
                )
                continue
            msg = (
                f"{w.key} set{where} after {first.describe(sf.path)}: CUDA ignores it once "
                "initialised, and any call after that import may initialise it; set it before "
                "the first torch-based import or in the launch environment"
            )
            origin = self.ctx.project.by_abspath.get(os.path.normpath(os.path.abspath(first.path)))
            col = origin.col(first.line, first.col_offset) if origin else first.col_offset + 1
            related = (
                Related(first.path, first.line, col, f"`{first.text}`: loads {first.library}"),
            )
            self.reporter.add("GPF001", sf, w.node, msg, related, context=self.caller_context)


def _functions(sf: SourceFile) -> list[CallTarget]:
    """Module-level functions and the methods of module-level classes."""
    out = []
    for d in sf.defs.values():
        if isinstance(d, ast.FunctionDef | ast.AsyncFunctionDef):
            out.append(CallTarget(sf, d))
        elif isinstance(d, ast.ClassDef):
            out.extend(
                CallTarget(sf, m, d)
                for m in d.body
                if isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef)
            )
    return out


def _owner(sf: SourceFile, where: Where) -> CallTarget | None:
    """The module-level function, or method of a module-level class, a statement sits in."""
    if not where.owners:
        return None
    top = sf.defs.get(where.owners[0])
    if isinstance(top, ast.FunctionDef | ast.AsyncFunctionDef):
        return CallTarget(sf, top)
    if isinstance(top, ast.ClassDef) and len(where.owners) > 1:
        for m in top.body:
            if isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef) and m.name == where.owners[1]:
                return CallTarget(sf, m, top)
    return None


def _writers(ctx: CheckContext, walker: FlowWalker) -> list[CallTarget]:
    """Functions that write the variables, then those that call them, across the files."""
    found: dict[int, CallTarget] = {}
    for sf in ctx.with_any(TRIGGERS):
        for w, _, where in all_env_writes(sf):
            t = _owner(sf, where) if w.key in CUDA_INIT_VARS else None
            if t is not None:
                found.setdefault(id(t.fn), t)
    frontier = list(found.values())
    for _ in range(_ROUNDS):
        if not frontier:
            break
        names = {t.fn.name for t in frontier}
        nxt = []
        for sf in _callers(ctx, frontier):
            if not any(sf.mentions(n) for n in names):
                continue
            for node, where in nodes_on(sf, tuple(sorted(names | _aliases(sf, names)))):
                t = _owner(sf, where)
                if t is None or id(t.fn) in found:
                    continue
                scope = Scope(sf, t.cls)
                calls = calls_in(node)
                if any(
                    id(c.fn) in found
                    for call in calls
                    for group in walker.resolver.targets(scope, call)
                    for c in group
                ):
                    found[id(t.fn)] = t
                    nxt.append(t)
        frontier = nxt
    return list(found.values())


def _aliases(sf: SourceFile, names: set[str]) -> set[str]:
    """Other names the module imports these functions as (`from helpers import set_gpus as sg`)."""
    return {
        local
        for local, full in sf.names.imports.items()
        if local not in names and full.rsplit(".", 1)[-1] in names
    }


def _callers(ctx: CheckContext, targets: list[CallTarget]) -> list[SourceFile]:
    """Checked files that can call these functions: their modules, the modules that import
    them, and those that import a package whose __init__ re-exports the name. A file not
    checked (tests, libraries, by default) is no caller: its calls make no finding."""
    checked = {id(sf) for sf in ctx.checked}
    out: dict[int, SourceFile] = {}
    for t in targets:
        out.setdefault(id(t.sf), t.sf)
        name = t.cls.name if t.cls is not None else t.fn.name
        parts = t.sf.module.split(".") if t.sf.module else []
        for n in range(len(parts), 0, -1):
            package = ".".join(parts[:n])
            if n < len(parts) and not any(
                init.mentions(name) or init.names.star
                for init in ctx.project.by_module.get(package, [])
                if init.tree is not None
            ):
                break  # the package does not re-export it: importers of it cannot reach it
            for f in ctx.project.importers_of(package):
                if f.mentions(name) and id(f) in checked:
                    out.setdefault(id(f), f)
    return list(out.values())


def _flow_only(walker: FlowWalker, ctx: CheckContext, t: CallTarget) -> bool:
    """Every use of the function is a call the module-level walk already followed."""
    if t.cls is not None:
        return False
    followed = walker.module_calls.get(id(t.fn), 0)
    if not followed:
        return False
    uses = len(re.findall(rf"\b{re.escape(t.fn.name)}\b", t.sf.text)) - 1
    # Another module can call it only by naming it in code (a word in a docstring is no call);
    # by any import form, so every file that names it counts.
    name = t.fn.name
    elsewhere = any(
        sf is not t.sf and sf.mentions(name) and name in _identifiers(sf)
        for sf in ctx.project.parsed()
    )
    return uses == followed and not elsewhere


def _identifiers(sf: SourceFile) -> frozenset[str]:
    """Names the module's code uses: names, attributes, imported names, and strings that are
    one identifier (`getattr(m, "choose")`, a registry key)."""
    cached = sf.cache.get("identifiers")
    if cached is None:
        found: set[str] = set()
        for node in ast.walk(cast(ast.AST, sf.tree)):
            if isinstance(node, ast.Name):
                found.add(node.id)
            elif isinstance(node, ast.Attribute):
                found.add(node.attr)
            elif isinstance(node, ast.alias):
                found.update(node.name.split("."))
                if node.asname:
                    found.add(node.asname)
            elif (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and node.value.isidentifier()
            ):
                found.add(node.value)
        cached = frozenset(found)
        sf.cache["identifiers"] = cached
    return cast(frozenset[str], cached)


def run(ctx: CheckContext) -> None:
    listener = _Listener(ctx.reporter, ctx)
    walker = FlowWalker(ctx.project, ctx.table, listener)
    writers = _writers(ctx, walker)
    # Modules that write the variables themselves (most that name them only read them).
    own = [
        sf
        for sf in ctx.with_any(TRIGGERS)
        if any(w.key in CUDA_INIT_VARS for w, _, _ in all_env_writes(sf))
    ]
    # Each place is reported once, from the first walk that reaches it: a module's own order
    # first, then functions as their callers see them, then callers in other modules.
    for sf in own:
        walker.module_state(sf)
    for t in sorted(writers, key=lambda t: t.sf.context != "code"):
        if not _flow_only(walker, ctx, t):
            label = f"{t.cls.name}.{t.fn.name}" if t.cls else t.fn.name
            listener.caller_context = None if t.sf.context == "code" else t.sf.context
            walker.walk_outside(t, walker.module_state(t.sf), f"{label}()")
    listener.caller_context = None
    names = {t.fn.name for t in writers}
    # Code first, so that a place code reaches too late is code's finding, whoever else does.
    for sf in sorted(_callers(ctx, writers), key=lambda sf: sf.context != "code"):
        if any(sf.mentions(n) for n in names):
            listener.caller_context = None if sf.context == "code" else sf.context
            walker.module_state(sf)
    listener.caller_context = None


CHECK = Check(("GPF001",), run, TRIGGERS)
