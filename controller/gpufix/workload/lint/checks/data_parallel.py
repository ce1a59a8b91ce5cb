"""GPF002: DataParallel as the only multi-GPU path; GPF011: DataParallel chosen by a framework flag.

GPF011 reads a constant "dp" or a "dp" branch of a conditional expression; it is not reported for
a Trainer used only to test, validate or predict.
GPF002 is not reported where the same module also offers a distributed path (DataParallel is then
the single-process fallback, as in the Trainer or yolov5), nor inside a function or class whose
name says it implements a DP option for others (a framework's `DataParallelStrategy`), nor
for inference: a function that calls `.eval()` and never trains, or, where neither the module nor
a module it imports or that imports it trains, module-level code or a function that evaluates or
loads trained weights (`torch.no_grad()`, `.eval()`, `.load(...)`; itself or through the module's
functions it calls).
"""

from __future__ import annotations

import ast
import re

from ..callsites import (
    DISTRIBUTED,
    CallSite,
    call_sites,
    imported_modules,
    importers,
    keyword,
    named,
    neighbours,
)
from ..project import SourceFile
from ..prune import nodes_on
from ..rankcode import names_in
from ..report import replace_node
from ..stmts import calls_in
from ..unused import in_unused_def
from . import Check, CheckContext

DATA_PARALLEL = frozenset(
    {
        "torch.nn.DataParallel",
        "torch.nn.parallel.DataParallel",
        "torch.nn.parallel.data_parallel.DataParallel",
        "torch.nn.parallel.data_parallel",
        "torch.nn.parallel.data_parallel.data_parallel",
    }
)
# A class that implements DP as one option among others (Lightning's DataParallelStrategy).
_DP_OWNER = re.compile(r"(?i:data_?parallel)|(^|_)(?i:dp)($|_)|DP(?=[A-Z_]|$)")
_LIGHTNING = ("pytorch_lightning.", "lightning.", "lightning_fabric.")
_FLAGS = ("strategy", "accelerator", "distributed_backend")
# DataParallel but not DistributedDataParallel; or a "dp" flag value.
TRIGGER = re.compile(rb"(?<!Distributed)DataParallel|data_parallel|[\"']dp[\"']")
QUICK = (b"ataParallel", b"data_parallel", b'"dp"', b"'dp'")  # one of them holds TRIGGER's match


def _distributed_here(sf: SourceFile) -> bool:
    return b"DistributedDataParallel" in sf.data or bool(named(sf, DISTRIBUTED))


def _offers_distributed(ctx: CheckContext, sf: SourceFile) -> bool:
    """The module, one it imports, or one that imports it (up to three steps) offers DDP:
    DataParallel is then the single-process fallback, or a helper the program does not use."""
    related = [sf, *neighbours(ctx.project, sf), *importers(ctx.project, sf)]
    return any(_distributed_here(m) for m in related)


def _offers_distributed_itself(ctx: CheckContext, sf: SourceFile) -> bool:
    """The module or one it imports offers DDP (its importers aside)."""
    return any(_distributed_here(m) for m in [sf, *imported_modules(ctx.project, sf)])


def _own_run(sf: SourceFile) -> set[str]:
    """The module's top-level functions that run when it runs as a script (it has an `if
    __name__ == "__main__":` block): those its module-level code names (a call,
    `fire.Fire(main)`, a dispatch dict `ENTRY = {"train": main}`), directly or through the
    module's functions ("" stands for module-level code). What its importers offer is not on that
    path. Only here, so the whole module is walked (the call index keeps only lines with a
    check's words)."""
    if sf.tree is None or not any(
        isinstance(s, ast.If) and "__name__" in names_in(s.test) for s in sf.tree.body
    ):
        return set()
    local = {f"{sf.module}.{name}" if sf.module else name: name for name in sf.defs}
    calls: dict[str, set[str]] = {}
    for stmt in sf.tree.body:
        owner = stmt.name if isinstance(stmt, _DEF_STMTS) else ""
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name | ast.Attribute):
                callee = local.get(sf.names.resolve(node) or "")
                if callee is not None and callee != owner:
                    calls.setdefault(owner, set()).add(callee)
    run, todo = {""}, [""]
    while todo:
        for callee in calls.get(todo.pop(), ()):
            if callee not in run:
                run.add(callee)
                todo.append(callee)
    return run


_DEF_STMTS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _inference_functions(sf: SourceFile, sites: list[CallSite]) -> set[tuple[str, ...]]:
    """Functions (or module-level code, `()`) that put a model in eval mode and never call
    backward or train: inference, where DataParallel's costs matter far less."""
    evals = {c.owners for c in sites if _attr(c) == "eval"}
    trains = {c.owners for c in sites if _attr(c) in ("backward", "train")}
    return evals - trains


# Calls that train: backward, an optimizer's step and zero_grad, a model's or trainer's train, a
# Keras/fastai/Lightning fit; and building an optimizer (torch.optim.*, apex.optimizers, AdamW).
_TRAIN_CALLS = frozenset(
    {"backward", "step", "zero_grad", "train", "fit", "fit_one_cycle", "fine_tune"}
)
_OPTIMIZERS = ("Adam", "SGD", "RMSprop", "Adagrad", "Adadelta", "LAMB", "Lion")
_OPTIMIZER = re.compile(r"(^|\.)(optim\w*\.|(" + "|".join(_OPTIMIZERS) + r")\w*$)")
# Calls that evaluate or load trained weights (`Net.load(path)`, `torch.load`).
_EVALUATE_CALLS = frozenset(
    {"eval", "load", "load_state_dict", "from_pretrained", "load_from_checkpoint"}
)
_NO_GRAD = frozenset(
    {
        "torch.no_grad",
        "torch.inference_mode",
        "torch.autograd.no_grad",
        "torch.autograd.inference_mode",
    }
)


# A function of any module whose name says it trains (`train_one_epoch`, `do_train`, `fit_model`):
# where it is defined may be outside the run (a sibling module not linted, a package).
_TRAINS_BY_NAME = re.compile(r"(?i)(^|_)(train|fit)($|_)")


def _training_call(sf: SourceFile, call: ast.Call) -> bool:
    f = call.func
    if isinstance(f, ast.Attribute) and f.attr in _TRAIN_CALLS:
        return True
    if isinstance(f, ast.Name) and _TRAINS_BY_NAME.search(f.id):
        return True
    return bool(_OPTIMIZER.search(sf.names.resolve(f) or ""))


def _trains(sf: SourceFile) -> bool:
    """The module trains somewhere: a training call on a line that names one (cached)."""
    cached = sf.cache.get("trains")
    if cached is None:
        bound = {**sf.names.imports, **sf.names.aliases}
        optimizers = (n for n, v in bound.items() if _OPTIMIZER.search(v))
        words = (*_TRAIN_CALLS, "optim", *_OPTIMIZERS, *optimizers)
        found = (n for node, _ in nodes_on(sf, words) for n in ast.walk(node))
        cached = any(isinstance(n, ast.Call) and _training_call(sf, n) for n in found)
        sf.cache["trains"] = cached
    return bool(cached)


def _never_trains(ctx: CheckContext, sf: SourceFile) -> bool:
    """Neither the module nor one it imports or that imports it (one step) trains a model."""
    related = (sf, *neighbours(ctx.project, sf))
    return not any(m.tree is not None and _trains(m) for m in related)


def _function(sf: SourceFile, owners: tuple[str, ...]) -> ast.AST | None:
    """The def (or class) an owners tuple names: `("Runner", "test")` -> its FunctionDef."""
    node: ast.AST | None = sf.defs.get(owners[0])
    for name in owners[1:]:
        body = getattr(node, "body", [])
        node = next((s for s in body if getattr(s, "name", None) == name), None)
    return node


# Loaders of data, not of trained weights (`json.load(f)` says nothing about a model).
_DATA_LOADERS = ("json.", "pickle.", "yaml.", "numpy.", "joblib.", "toml.", "tomllib.", "dill.")


def _evaluates(sf: SourceFile, node: ast.AST) -> bool:
    """A `.eval()` call, a load of trained weights (`.load`, `load_state_dict`,
    `from_pretrained`; not json/pickle/yaml/numpy loads), or torch.no_grad / inference_mode (a
    with-block or a decorator)."""
    if isinstance(node, ast.Call):
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr in _EVALUATE_CALLS:
            return not (sf.names.resolve(f) or "").startswith(_DATA_LOADERS)
        return _evaluates(sf, f)
    return isinstance(node, ast.Attribute | ast.Name) and sf.names.resolve(node) in _NO_GRAD


def _shows_inference(sf: SourceFile, owners: tuple[str, ...]) -> bool:
    """The function, or a function of the module it calls (at any depth), evaluates or loads
    weights; for module-level code (`()`), anything in the module does."""
    if not owners:
        return sf.tree is not None and any(
            _evaluates(sf, n) for n in _calls_and_decorators(sf.tree)
        )
    todo, seen = [_function(sf, owners)], set()
    while todo:
        fn = todo.pop()
        if fn is None or id(fn) in seen:
            continue
        seen.add(id(fn))
        for n in _calls_and_decorators(fn):
            if _evaluates(sf, n):
                return True
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
                todo.append(sf.defs.get(n.func.id))
    return False


def _calls_and_decorators(node: ast.AST) -> list[ast.AST]:
    """The calls under a node, and its decorators (a bare `@torch.no_grad`)."""
    calls: list[ast.AST] = [*calls_in(node)]
    return [*getattr(node, "decorator_list", []), *calls]


def _inference(ctx: CheckContext, sf: SourceFile, owners: tuple[str, ...]) -> bool:
    """Inference: the DataParallel call's function (or module-level code) evaluates or loads
    trained weights, and neither this module nor a neighbour trains."""
    return _never_trains(ctx, sf) and _shows_inference(sf, owners)


def _attr(site: CallSite) -> str:
    f = site.node.func
    return f.attr if isinstance(f, ast.Attribute) else ""


def _class_def(
    ctx: CheckContext, sf: SourceFile, name: str
) -> tuple[SourceFile, ast.ClassDef] | None:
    """The project class a dotted name stands for: `pkg.utils.DataParallel` -> its ClassDef."""
    local = name[len(sf.module) + 1 :] if sf.module and name.startswith(sf.module + ".") else name
    found: tuple[SourceFile, list[str]] | None = (sf, [local]) if local in sf.defs else None
    found = found or ctx.project.split(sf, name)
    if found is None or len(found[1]) != 1 or found[0].tree is None:
        return None
    node = found[0].defs.get(found[1][0])
    return (found[0], node) if isinstance(node, ast.ClassDef) else None


def _is_data_parallel(ctx: CheckContext, sf: SourceFile, name: str | None, depth: int = 3) -> bool:
    """torch's DataParallel, or a project class derived from it (a project's own
    `class DataParallel(torch.nn.DataParallel)`), up to three classes deep."""
    if name is None:
        return False
    if name in DATA_PARALLEL:
        return True
    found = _class_def(ctx, sf, name) if depth > 0 else None
    if found is None:
        return False
    where, cls = found
    bases = (where.names.resolve(b) for b in cls.bases)
    return any(_is_data_parallel(ctx, where, b, depth - 1) for b in bases)


def _one_device(sf: SourceFile, call: ast.Call) -> bool:
    """`device_ids` is a list of one GPU, written out or through a name every assignment of the
    module binds to one (`gpus = [0]`): DataParallel then runs the module on that GPU alone
    (torch.nn.DataParallel.forward: one device id, no replicas), no multi-GPU path at all."""
    ids = keyword(call, "device_ids") or (call.args[1] if len(call.args) > 1 else None)
    if isinstance(ids, ast.Name) and sf.tree is not None:
        bound: list[ast.expr | None] = []
        for n in ast.walk(sf.tree):
            if isinstance(n, ast.Assign) and any(_is(t, ids.id) for t in n.targets):
                bound.append(n.value)
            elif isinstance(n, ast.AugAssign | ast.AnnAssign) and _is(n.target, ids.id):
                bound.append(None)  # grows, or is annotated: not known to stay one
            elif isinstance(n, ast.arg) and n.arg == ids.id:
                bound.append(None)  # a parameter: any list a caller passes
            elif (
                isinstance(n, ast.Call)
                and isinstance(n.func, ast.Attribute)
                and _is(n.func.value, ids.id)
            ):
                bound.append(None)  # gpus.append(1), gpus.extend(...)
        return bool(bound) and all(_one_element(v) for v in bound)
    return _one_element(ids)


def _is(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def _one_element(node: ast.expr | None) -> bool:
    return (
        isinstance(node, ast.List | ast.Tuple)
        and len(node.elts) == 1
        and not any(isinstance(e, ast.Starred) for e in node.elts)
    )


def _data_parallel(ctx: CheckContext, sf: SourceFile, sites: list[CallSite]) -> None:
    known: dict[str | None, bool] = {}  # a file calls the same names many times
    for c in sites:
        if c.name not in known:
            known[c.name] = _is_data_parallel(ctx, sf, c.name)
    dp = [c for c in sites if known[c.name]]
    if not dp or _offers_distributed_itself(ctx, sf):
        return
    if _offers_distributed(ctx, sf):
        # only an importer offers DDP: DataParallel on the module's own script path stays
        own = _own_run(sf)
        dp = [c for c in dp if (c.owners[0] if c.owners else "") in own]
        if not dp:
            return
    inference = _inference_functions(sf, sites)
    for c in dp:
        if any(_DP_OWNER.search(o) for o in c.classes) or c.owners in inference:
            continue
        if _inference(ctx, sf, c.owners) or _one_device(sf, c.node):
            continue
        if in_unused_def(ctx.project, sf, c):
            continue  # a helper nothing calls (init_net() of GAN boilerplate, kept unused)
        ctx.reporter.add(
            "GPF002",
            sf,
            c.node,
            f"{c.name} is this program's only multi-GPU path: one process drives every GPU "
            "and it scales poorly; use DistributedDataParallel (one process per GPU, torchrun)",
        )


def _lightning_trainer(name: str | None) -> bool:
    return bool(name) and name.startswith(_LIGHTNING) and name.endswith((".Trainer", ".Fabric"))  # type: ignore[union-attr]


_EVALUATE = frozenset({"test", "validate", "predict"})


def _evaluation_only(sf: SourceFile) -> set[int]:
    """Trainer calls assigned to a name that the statements after it (in the same block, until
    the name is bound again) use only as `name.test/validate/predict(...)`: evaluation, where
    Lightning advises one device, so "use ddp" is the wrong advice."""
    out: set[int] = set()
    for node in ast.walk(sf.tree) if sf.tree else ():
        for block in (getattr(node, f, None) for f in ("body", "orelse", "finalbody")):
            if not isinstance(block, list):
                continue
            for i, stmt in enumerate(block):
                if (
                    isinstance(stmt, ast.Assign)
                    and isinstance(stmt.value, ast.Call)
                    and len(stmt.targets) == 1
                    and isinstance(stmt.targets[0], ast.Name)
                    and _only_evaluates(stmt.targets[0].id, block[i + 1 :])
                ):
                    out.add(id(stmt.value))
    return out


def _only_evaluates(name: str, after: list[ast.stmt]) -> bool:
    """Every use is `name.test/validate/predict(...)` or an attribute read (`name.logger`): no
    other method runs and the Trainer is not handed on."""
    uses = attributes = evaluations = 0
    for stmt in after:
        if isinstance(stmt, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in stmt.targets
        ):
            break
        for n in ast.walk(stmt):
            if isinstance(n, ast.Name) and n.id == name:
                uses += 1
            elif isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name):
                attributes += n.value.id == name
            elif (
                isinstance(n, ast.Call)
                and isinstance(n.func, ast.Attribute)
                and isinstance(n.func.value, ast.Name)
                and n.func.value.id == name
            ):
                if n.func.attr not in _EVALUATE:
                    return False
                evaluations += 1
    return evaluations > 0 and uses == attributes


def _dp_value(sf: SourceFile, value: ast.expr | None) -> ast.expr | None:
    """The "dp" in a flag's value: the value itself, or a branch of a conditional expression
    (`"dp" if args.gpus > 1 else None`: every multi-GPU run gets DataParallel)."""
    branches = [value.body, value.orelse] if isinstance(value, ast.IfExp) else [value]
    return next((b for b in branches if b is not None and sf.names.const_str(b) == "dp"), None)


def _dp_flag(ctx: CheckContext, sf: SourceFile, sites: list[CallSite]) -> None:
    evaluation: set[int] | None = None
    for c in sites:
        if not _lightning_trainer(c.name):
            continue
        if evaluation is None:
            evaluation = _evaluation_only(sf)
        if id(c.node) in evaluation:
            continue
        for flag in _FLAGS:
            value = _dp_value(sf, keyword(c.node, flag))
            if value is None:
                continue
            fix = replace_node(sf, value, '"ddp"', f"Use {flag}='ddp'")
            ctx.reporter.add(
                "GPF011",
                sf,
                value,
                f"{flag}='dp' makes Lightning wrap the model in torch.nn.DataParallel (one "
                "process for every GPU; dropped from the Trainer in Lightning 2.0); use 'ddp'",
                fix=fix,
            )


def run(ctx: CheckContext) -> None:
    for sf in ctx.matching(QUICK, TRIGGER):
        sites = call_sites(sf)
        _data_parallel(ctx, sf, sites)
        _dp_flag(ctx, sf, sites)


CHECK = Check(("GPF002", "GPF011"), run, QUICK)
