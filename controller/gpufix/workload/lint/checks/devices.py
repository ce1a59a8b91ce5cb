"""GPF005 / GPF006 / GPF008: every rank landing on GPU 0 in code that starts a process group.

Multi-rank code here means a module that calls init_process_group, wraps a model in
DDP/FSDP or runs under accelerate or Lightning Fabric (callsites.DISTRIBUTED), outside a
top-level function nothing in the run refers to (`_starts_ranks`, `unused.py`). A module that
sets CUDA_VISIBLE_DEVICES per rank (`writes_visible_devices`), runs one rank per host
(`hostranks.py`) or runs its ranks as Ray GPU workers (`rayworkers.py`) gives each rank its own
GPU 0, so `cuda:0` is right there and GPF005/GPF006/GPF008 stay silent; GPF006 itself is
`set_device.py`. GPF005 also stays silent in code no rank runs as its own: a function called only under a rank test, and a
function that starts the ranks. A group of one rank (`world_size=1`, a self-test) has no other
rank to collide with: GPF006 skips it and GPF008 skips loads in the code that starts it.
"""

from __future__ import annotations

import ast
import re
from typing import cast

from ..callerpin import pinned_by_callers
from ..callsites import (
    DISTRIBUTED,
    PROCESS_GROUP,
    SELECT_DEVICE,
    TORCH_LOAD,
    CallSite,
    call_sites,
    call_sites_in,
    keyword,
    named,
    one_rank_group,
)
from ..choices import in_ranks_branch, single_process_branch
from ..deepreach import DeepReach, path
from ..hostranks import one_rank_per_host
from ..loadpath import DATASET, dataset_file
from ..project import Project, SourceFile
from ..prune import segment
from ..rankcode import STARTS_PROCESSES, entries, names_in, rank_calls
from ..rayworkers import ray_gpu_workers
from ..report import append_argument
from ..statedicts import STATE_WITHOUT_TENSORS, into_state
from ..stmts import statements
from ..unused import in_unused_def, unused
from ..visible import writes_visible_devices
from . import Check, CheckContext
from .set_device import process_group

TRIGGERS = (
    b"init_process_group",
    b"init_distributed",
    b"DistributedDataParallel",
    b"FullyShardedDataParallel",
    b"Accelerator",
    b"Fabric",
)
_BRANCHY = re.compile(
    r"(?i)rank|distributed|ddp|world_size|multi_?gpu|n_?gpu|num_gpus|is_main|master"
    r"|main_process|global_zero"
)
_DEVICE_BRANCH = re.compile(r"(?i)rank|distributed|ddp|world_size|gpu|is_main|master|local")
# Checkpoint parts that hold no GPU tensors (RNG state, scheduler, grad scaler, configs).
_NO_TENSORS = re.compile(r"(?i)rng|random|sched|scaler|seed|vocab|token|meta|json")
_MAIN = re.compile(r"(?i)is_main|main_process|is_master|rank_?zero|is_rank_0")


def _under_branch(site: CallSite, pattern: re.Pattern[str]) -> bool:
    return any(pattern.search(name) for t in site.tests for name in names_in(t))


def _apart(sf: SourceFile, site: CallSite) -> bool:
    """Under an `if` on a rank or distributed test, and not in the branch the ranks take
    (`if ddp: x.to("cuda:0")` is every rank's code)."""
    return any(
        _BRANCHY.search(name) and not in_ranks_branch(sf, t, site.node)
        for t in site.tests
        for name in names_in(t)
    )


def _rank_zero_only(site: CallSite) -> bool:
    for t in site.tests:
        if any(_MAIN.search(n) for n in names_in(t)):
            return True
        if isinstance(t, ast.Compare) and any(
            isinstance(c, ast.Constant) and c.value == 0 for c in t.comparators
        ):
            return any("rank" in n.lower() for n in names_in(t.left))
    return False


def _after_group_failed(sf: SourceFile) -> tuple[tuple[int, int], ...]:
    """Line ranges of the `except` of each `try` that starts the process group: a call there
    runs only when no group started, in a process of its own (a single-GPU fallback), not on
    every rank. Lines, not a walk per call: the statements are walked once."""
    cached = sf.cache.get("after-group-failed")
    if cached is None:
        lines = [s.node.lineno for s in call_sites(sf) if s.name in PROCESS_GROUP]
        found: list[tuple[int, int]] = []
        if lines and sf.tree is not None:
            for stmt, _ in statements(sf.tree.body):
                if not isinstance(stmt, ast.Try) or not stmt.body or not stmt.handlers:
                    continue
                first, last = stmt.body[0].lineno, stmt.body[-1].end_lineno or stmt.lineno
                if any(first <= n <= last for n in lines):
                    found += [(h.lineno, h.end_lineno or h.lineno) for h in stmt.handlers]
        cached = tuple(found)
        sf.cache["after-group-failed"] = cached
    return cast(tuple[tuple[int, int], ...], cached)


def _int_zero(node: ast.expr | None) -> bool:
    """The literal 0 (an int device index; not False, not 0.0)."""
    return isinstance(node, ast.Constant) and type(node.value) is int and node.value == 0


def _gpu0(sf: SourceFile, site: CallSite) -> ast.AST | None:
    """The argument that hard-codes GPU 0 in this call, if any."""
    call = site.node
    values = [*call.args, *(kw.value for kw in call.keywords)]
    for v in values:
        if sf.names.const_str(v) == "cuda:0":
            return v
    func = call.func
    first = call.args[0] if call.args else None
    if _int_zero(first) and (
        (isinstance(func, ast.Attribute) and func.attr == "cuda")  # .cuda(0)
        or site.name in SELECT_DEVICE  # torch.cuda.set_device(0), torch.cuda.device(0)
    ):
        return first
    if (site.name or "").endswith("DistributedDataParallel"):
        # DDP's device_ids names the one GPU this rank's module lives on (DDP docs: device_ids=
        # [rank]); a literal [0] (or output_device=0) puts every rank's replica on GPU 0.
        for kw in ("device_ids", "output_device"):
            given = keyword(call, kw)
            if isinstance(given, ast.List) and len(given.elts) == 1:
                given = given.elts[0]
            if isinstance(given, ast.Constant) and given.value == 0 and given.value is not False:
                return given
    if (
        site.name == "torch.device"
        and len(call.args) == 2
        and sf.names.const_str(call.args[0]) == "cuda"
        and getattr(call.args[1], "value", None) == 0
    ):
        return call.args[1]
    return None


def _not_every_rank(sf: SourceFile) -> frozenset[str]:
    """Functions no rank runs as its own code: those the module calls only under a rank test
    or from such functions (`if rank == 0: evaluate(...)`, and what `evaluate` calls), those
    that start the ranks (`mp.spawn`, `mp.Process`: the parent process, not a rank), and process targets
    that never start a process group, themselves or through a function of the module they call
    (a one-off profiling process that picks its own GPU)."""
    cached = sf.cache.get("not-every-rank")
    if cached is not None:
        return cast(frozenset[str], cached)
    calls: dict[str, list[tuple[bool, str]]] = {}  # callee -> (under a rank test, caller)
    parents: set[str] = set()
    targets: set[str] = set()
    callees: dict[str, set[str]] = {}
    starts_group = {s.owners[-1] for s in named(sf, PROCESS_GROUP) if s.owners}
    for call in rank_calls(sf, _BRANCHY):
        name, func = _callee(call.node.func), call.func
        if name in STARTS_PROCESSES:
            if func:
                parents.add(func)
            targets.update(_target(call.node))
        calls.setdefault(name, []).append((call.branched, func))
        callees.setdefault(func, set()).add(name)
    ranks = _reaching(starts_group, callees)
    out = frozenset(_one_rank_only(calls, ranks) | parents | (targets - ranks))
    sf.cache["not-every-rank"] = out
    return out


def _one_rank_only(calls: dict[str, list[tuple[bool, str]]], ranks: set[str]) -> set[str]:
    """Functions every call of which is under a rank test or inside such a function, at any
    depth (`if rank == 0: evaluate()`, and `evaluate` calls `inner`). A function that starts
    the process group, itself or through the module's functions, is rank code whatever test
    it sits under (`if args.distributed: mp.spawn(main_worker) else: main_worker(...)`)."""
    out: set[str] = set()
    grew = True
    while grew:
        grew = False
        for name, seen in calls.items():
            if name in ranks or not name or name in out:
                continue
            if all(b or (f and f in out) for b, f in seen):
                out.add(name)
                grew = True
    return out


def _callee(f: ast.expr) -> str:
    return f.id if isinstance(f, ast.Name) else getattr(f, "attr", "")


def _target(call: ast.Call) -> list[str]:
    """The function a process start runs: `Process(target=f)`, `spawn(f, ...)`."""
    t = keyword(call, "target") or (call.args[0] if call.args else None)
    return [t.id] if isinstance(t, ast.Name) else []


def _reaching(seeds: set[str], callees: dict[str, set[str]]) -> set[str]:
    """The functions that call into `seeds`, directly or through other functions of the module."""
    out = set(seeds)
    grew = True
    while grew:
        grew = False
        for f, called in callees.items():
            if f and f not in out and called & out:
                out.add(f)
                grew = True
    return out


def _only(site: CallSite, only: set[str] | None) -> bool:
    """Outside the names another module runs on every rank (None: the whole module counts)."""
    return only is not None and not (site.owners and site.owners[0] in only)


def _method_called(site: CallSite, via: SourceFile) -> bool:
    """A load in a method of a class the rank code builds runs on every rank only if that code
    calls the method: a special method (`__init__`, `__call__`: Python calls them itself) or
    `forward` (an nn.Module's `__call__` runs it), `obj.name(...)` on an object, or
    `Class.name(...)` (an uncalled `load_weights()`, or a method named only in a comment, does
    not run; `torch.load` is not a call of a method named `load`)."""
    if not (site.classes and site.owners[:1] == site.classes[:1] and len(site.owners) > 1):
        return True  # a function, called by name
    cls, method = site.owners[0], site.owners[1]
    on_objects, dotted = _attribute_calls(via)
    return (
        (method.startswith("__") and method.endswith("__"))
        or method == "forward"
        or method in on_objects
        or any(d.endswith(f".{cls}.{method}") or d == f"{cls}.{method}" for d in dotted)
    )


def _attribute_calls(sf: SourceFile) -> tuple[set[str], set[str]]:
    """`obj.name(...)` calls on objects (their attribute names), and the dotted names the
    attribute calls on imported names resolve to (`torch.load`, `me.MoE.load`)."""
    cached = sf.cache.get("attribute-calls")
    if cached is None:
        on_objects: set[str] = set()
        dotted: set[str] = set()
        for n in ast.walk(sf.tree) if sf.tree is not None else ():
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
                name = sf.names.resolve(n.func)
                if name:
                    dotted.add(name)
                else:
                    on_objects.add(n.func.attr)
        cached = sf.cache["attribute-calls"] = (on_objects, dotted)
    return cast(tuple[set[str], set[str]], cached)


def _where(via: SourceFile | None) -> str:
    if via is None:
        return "in code that starts a process group"
    return f"in code every rank runs ({via.rel}, which starts the process group, calls it)"


def _same_gpu(
    ctx: CheckContext, sf: SourceFile, only: set[str] | None = None, via: SourceFile | None = None
) -> None:
    skip: frozenset[str] | None = None
    for site in call_sites(sf) if only is None else call_sites_in(sf, only):
        if _only(site, only):
            continue
        arg = _gpu0(sf, site)
        if arg is None or _apart(sf, site) or single_process_branch(sf, site.node):
            continue
        if any(a <= site.node.lineno <= b for a, b in _after_group_failed(sf)):
            continue
        if skip is None:
            skip = _not_every_rank(sf)
        if site.owners and site.owners[-1] in skip:
            continue
        if site.owners and pinned_by_callers(ctx.project, sf, site.owners[0]):
            continue
        ctx.reporter.add(
            "GPF005",
            sf,
            arg,
            f"GPU 0 hard-coded {_where(via)}: every rank uses the first "
            "GPU; use the rank's device (torch.device('cuda', local_rank) after "
            "torch.cuda.set_device(local_rank))",
        )


def _scope(site: CallSite) -> tuple[tuple[str, ...], bool]:
    """The code a call runs in: its function, or module level (apart from the __main__ block)."""
    return site.owners, not site.owners and any("__name__" in names_in(t) for t in site.tests)


def _one_rank_scopes(sf: SourceFile) -> set[tuple[tuple[str, ...], bool]]:
    """Where the code starts a group of one rank (`world_size=1`, a self-test): a load there
    lands on that rank's own GPU, no other rank's."""
    return {_scope(site) for site in call_sites(sf) if one_rank_group(site)}


def _forwarded(call: ast.Call) -> bool:
    """`torch.load(*args, **kwargs)`: a wrapper hands on its caller's arguments, map_location
    among them or not; the call alone does not say."""
    return any(isinstance(a, ast.Starred) for a in call.args) or any(
        k.arg is None for k in call.keywords
    )


def _torch_load(
    ctx: CheckContext,
    sf: SourceFile,
    only: set[str] | None = None,
    via: SourceFile | None = None,
    deep: dict[int, str] | None = None,
) -> None:
    """In a helper module (`only`: the names every rank runs; `deep`: the loads the deep reach
    found, with where each runs), only loads handed to a model's or optimizer's
    `load_state_dict`: the helpers' other loads were mostly CPU data."""
    one_rank: set[tuple[tuple[str, ...], bool]] | None = None
    into: dict[int, str] | None = None
    helper = only is not None or deep is not None
    for site in named(sf, TORCH_LOAD):
        call = site.node
        if deep is not None:
            if id(call) not in deep:
                continue
        elif _only(site, only) or (via is not None and not _method_called(site, via)):
            continue
        if site.name not in TORCH_LOAD or len(call.args) >= 2 or keyword(call, "map_location"):
            continue
        if single_process_branch(sf, call):
            continue  # the `else` of `if dist.is_initialized()`: no group, one process
        if _forwarded(call):
            continue
        if _rank_zero_only(site) or _under_branch(site, _DEVICE_BRANCH):
            continue
        if one_rank is None:
            one_rank = _one_rank_scopes(sf)
        if _scope(site) in one_rank:
            continue
        if into is None:
            into = into_state(sf)
        receiver = into.get(id(call))
        if receiver in STATE_WITHOUT_TENSORS:
            continue
        source = segment(sf, call.args[0]) if call.args else ""
        if source and _NO_TENSORS.search(source):
            continue
        weights = receiver is not None and receiver not in DATASET  # a model's, an optimizer's
        if not weights and helper:
            continue  # a helper's data (statistics, cached datasets): mostly saved from CPU
        if not weights and call.args and dataset_file(call.args[0]):
            continue
        if site.owners and pinned_by_callers(ctx.project, sf, site.owners[0]):
            continue
        fix = append_argument(sf, call, 'map_location="cpu"', "Load onto the CPU first")
        ctx.reporter.add(
            "GPF008",
            sf,
            call,
            f"torch.load without map_location {deep[id(call)] if deep else _where(via)}: "
            "tensors go back to the GPU "
            "they were saved from (usually cuda:0) on every rank; pass map_location='cpu' or "
            "the rank's device",
            fix=fix,
        )


def _starts_ranks(ctx: CheckContext, sf: SourceFile) -> bool:
    """The module starts a process group, wraps a model for DDP/FSDP or runs under accelerate,
    and not only in a helper nothing calls (a `setup_ddp()` kept in a script that runs in one
    process)."""
    sites = named(sf, DISTRIBUTED - {"torch.multiprocessing.spawn"})
    return any(not in_unused_def(ctx.project, sf, c) for c in sites)


def run(ctx: CheckContext) -> None:
    ranks = [sf for sf in ctx.with_any(TRIGGERS) if _starts_ranks(ctx, sf)]
    for sf in ranks:
        if _own_gpu_zero(ctx.project, sf):
            continue
        _same_gpu(ctx, sf)
        _torch_load(ctx, sf)
        process_group(ctx, sf)
    _rank_modules(ctx, ranks)


def _own_gpu_zero(project: Project, sf: SourceFile) -> bool:
    """Each rank's GPU 0 is its own: the module sets CUDA_VISIBLE_DEVICES per rank, runs one
    rank on each host (hostranks.py), or runs its ranks as Ray workers (rayworkers.py)."""
    return writes_visible_devices(sf) or one_rank_per_host(project, sf) or ray_gpu_workers(sf)


def _rank_modules(ctx: CheckContext, ranks: list[SourceFile]) -> None:
    """GPF005 and GPF008 in another run module's functions that a multi-rank module calls on
    every rank (the names every caller calls, together; the first caller named). A caller (or
    callee) whose GPU 0 is each rank's own (`_own_gpu_zero`) is left alone. GPF008 only for
    weights (`_torch_load`): helpers' loads of data were judged FP (10 of 13 on the 132)."""
    checked = {id(f) for f in ctx.checked}
    done = {id(f) for f in ranks}
    found: dict[int, tuple[SourceFile, SourceFile, set[str]]] = {}
    for caller in ranks:
        if _own_gpu_zero(ctx.project, caller):
            continue
        for sf, names in entries(ctx.project, caller, _BRANCHY, _not_every_rank(caller)).items():
            if id(sf) in done or id(sf) not in checked or _own_gpu_zero(ctx.project, sf):
                continue
            found.setdefault(id(sf), (sf, caller, set()))[2].update(names)
    for sf, caller, names in found.values():
        _same_gpu(ctx, sf, names, caller)
        _torch_load(ctx, sf, names, caller)
    _deep_loads(ctx, ranks)


def _deep_loads(ctx: CheckContext, ranks: list[SourceFile]) -> None:
    """GPF008 for weights loads several calls below a function of a module that is no rank
    module itself (`ranks`: those stay one level deep, `_rank_modules`) but calls a project
    function that starts the group (deepreach.py), in modules whose GPU 0 is not each rank's
    own; the first path found is named. Seeds in rank modules too were measured: one FP (a
    downloaded backbone file loaded two calls below, improv-mask), under the 90% goal."""
    project = ctx.project
    checked = {id(f) for f in ctx.checked}
    reach = DeepReach(project, _BRANCHY)

    def skip(sf: SourceFile, func: str) -> bool:
        if _own_gpu_zero(project, sf):
            return True
        return bool(func) and (func in _not_every_rank(sf) or unused(project, sf, func))

    found: dict[int, tuple[SourceFile, dict[int, str]]] = {}
    seeds = reach.seeds(list(ctx.checked), ranks, skip)
    for step in reach.walk(seeds):
        sf = step.target.sf
        if id(sf) not in checked:
            continue
        loads = reach.loads(step)
        if not loads or _own_gpu_zero(project, sf):
            continue
        via = path(step)
        where = f"in code every rank runs: {step.seed}" + (f" and calls {via}" if via else "")
        spot = found.setdefault(id(sf), (sf, {}))[1]
        for call in loads:
            spot.setdefault(id(call), where)
    for sf, deep in found.values():
        _torch_load(ctx, sf, deep=deep)


CHECK = Check(("GPF005", "GPF006", "GPF008"), run, TRIGGERS)
