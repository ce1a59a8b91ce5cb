"""Where a `torch.load` goes: the `load_state_dict(...)` it is handed to, straight or through a
name bound once in the same function, and the last word of that receiver's name (GPF008: the
receiver says whether the file holds weights or a loader's, scheduler's or scaler's state)."""

from __future__ import annotations

import ast
from typing import cast

from .callsites import call_sites
from .loadpath import DATASET
from .names import WORDS
from .project import SourceFile
from .stmts import statements

# Objects whose load_state_dict takes no GPU tensors, as the words of their name
# (`self.train_dataloader`, `lr_scheduler`): a data loader's or sampler's position
# (torchdata's StatefulDataLoader.state_dict()), a scheduler's counters, a grad scaler's scale.
STATE_WITHOUT_TENSORS = frozenset(
    {"dataloader", "loader", "dl", "sampler", "scheduler", "sched", "scaler"}
)


def into_state(sf: SourceFile) -> dict[int, str]:
    """Loads handed to `x.load_state_dict(...)` (also `torch.load(p)["model"]`, `.get(k)`,
    `state_dict=`), with the last word of `x`: the receiver says what the file holds when its
    name does not (`self.dataloader`: no GPU tensors; `model`: weights). `upsampler`,
    `model.token_embedding` or a receiver built by a call name no part without tensors.
    A load first bound to a name counts too (`_bound_loads`): `ckpt = torch.load(p)`, then
    `opt.load_state_dict(ckpt["opt"])` in the same function."""
    cached = sf.cache.get("into-state")
    if cached is not None:
        return cast(dict[int, str], cached)
    out: dict[int, str] = {}
    lines: list[int] = []  # where a load_state_dict call hands on a name
    for site in call_sites(sf):
        for arg, receiver in _state_args(site.node):
            given = _loaded(arg)
            out[id(given)] = receiver
            if isinstance(given, ast.Name):
                lines.append(site.node.lineno)
    body = sf.tree.body if sf.tree is not None and lines else []
    for fn, _ in statements(body):
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef) and any(
            fn.lineno <= n <= (fn.end_lineno or fn.lineno) for n in lines
        ):
            out.update(_bound_loads(fn))
    sf.cache["into-state"] = out
    return out


def _state_args(call: ast.Call) -> list[tuple[ast.expr, str]]:
    """What `x.load_state_dict(...)` is given (its first argument, `state_dict=`), each with
    the last word of `x`."""
    f = call.func
    if not (isinstance(f, ast.Attribute) and f.attr == "load_state_dict"):
        return []
    given = [*call.args[:1], *(k.value for k in call.keywords if k.arg == "state_dict")]
    return [(arg, _last_word(f.value)) for arg in given]


def _bound_loads(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[int, str]:
    """Calls bound to a name by one plain assignment (`ckpt = torch.load(p)`) whose name a later
    `x.load_state_dict(...)` of the same function is given (`ckpt`, `ckpt["dense"]`,
    `ckpt.get("model")`, `state_dict=ckpt`), with the last word of `x`; a receiver that takes
    tensors wins over one that takes none (`sampler`, then `model`). The name's only binding
    in the function is that assignment (a parameter it replaces aside): a second assignment, a
    `for`/`with` target, `+=`, or `global`/`nonlocal` leave the call unread. A use under a branch
    counts (`if "dense" in ckpt:`): the load itself ran, and the file holds what it hands on."""
    bound: dict[str, list[ast.Assign]] = {}
    stores: dict[str, int] = {}
    uses: dict[str, list[tuple[int, str]]] = {}
    shared: set[str] = set()
    for node in _own_scope(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            stores[node.id] = stores.get(node.id, 0) + 1
        elif isinstance(node, ast.ExceptHandler) and node.name:
            stores[node.name] = stores.get(node.name, 0) + 1
        elif isinstance(node, ast.alias):
            name = (node.asname or node.name).split(".")[0]
            stores[name] = stores.get(name, 0) + 1
        elif isinstance(node, ast.Global | ast.Nonlocal):
            shared.update(node.names)
        elif (
            isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            and node is not fn
        ):
            stores[node.name] = stores.get(node.name, 0) + 1
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Call)
        ):
            bound.setdefault(node.targets[0].id, []).append(node)
        if isinstance(node, ast.Call):
            for arg, receiver in _state_args(node):
                given = _loaded(arg)
                if isinstance(given, ast.Name):
                    uses.setdefault(given.id, []).append((node.lineno, receiver))
    out: dict[int, str] = {}
    for name, assigns in bound.items():
        if len(assigns) != 1 or stores.get(name) != 1 or name in shared:
            continue
        after = assigns[0].end_lineno or assigns[0].lineno
        receivers = [r for line, r in uses.get(name, ()) if line > after]
        if receivers:
            weights = [r for r in receivers if r not in STATE_WITHOUT_TENSORS | DATASET]
            out[id(assigns[0].value)] = (weights or receivers)[0]
    return out


def _own_scope(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.AST]:
    """The nodes of a function's own scope: its body, without the bodies of the functions,
    lambdas and classes it defines (their names are its own)."""
    out: list[ast.AST] = [fn]
    todo: list[ast.AST] = list(fn.body)
    while todo:
        node = todo.pop()
        out.append(node)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            todo.extend(node.decorator_list)
            continue
        if isinstance(node, ast.Lambda):
            continue
        todo.extend(ast.iter_child_nodes(node))
    return out


def _loaded(arg: ast.expr) -> ast.expr:
    """`torch.load(p)["model"]` and `torch.load(p).get("model")` hand on the load itself."""
    if isinstance(arg, ast.Subscript):
        return arg.value
    f = arg.func if isinstance(arg, ast.Call) else None
    if isinstance(f, ast.Attribute) and f.attr == "get":
        return f.value
    return arg


def _last_word(owner: ast.expr) -> str:
    """The last word of a receiver's name, singular: `self.trainLoader` -> "loader",
    `lr_schedulers[0]` -> "scheduler", `sampler_net` -> "net"."""
    if isinstance(owner, ast.Subscript):
        owner = owner.value
    name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
    words = WORDS.findall(name)
    return words[-1].lower().removesuffix("s") if words else ""
