"""Which branch of `a if test else b` the ranks of a distributed run take (GPF005): the test's
direction, read from how such code names its flags. A test is "distributed" when it holds with
several ranks (`ddp`, `is_distributed`, `dist.is_initialized()`, `world_size > 1`,
`local_rank != -1`), "single" when it holds only in one process (`not ddp`, `world_size == 1`,
`local_rank == -1`), and unknown otherwise, in which case neither branch is left alone.
In a comparison, a key written as a string counts as a name (`os.environ["WORLD_SIZE"] == 1`,
`cfg.get("world_size") > 1`). An `if` comparing a rank count (`if world_size != 1: raise ...`)
whose body always leaves (`raise`, `return`) guards the rest of its block: what follows runs in
one process only.
"""

from __future__ import annotations

import ast
import re
from typing import cast

from .project import SourceFile
from .rankcode import names_in
from .stmts import calls_in, nodes_below

_FLAG = re.compile(r"(?i)distributed|ddp|multi_?gpu|is_initialized")
# Counts of ranks, not of GPUs (`n_gpu > 1` is DataParallel in one process).
_COUNT = re.compile(r"(?i)world_size|nprocs|num_processes")
_RANK = re.compile(r"(?i)rank")


def single_process_branch(sf: SourceFile, call: ast.Call) -> bool:
    """The call sits in the branch of a choice (or an `if`) that only a single process takes."""
    return id(call) in _branches(sf)[0]


def in_ranks_branch(sf: SourceFile, test: ast.expr, call: ast.Call) -> bool:
    """The call sits in the branch of `if test:` that the ranks take (the body of `if ddp:`, the
    `else` of `if world_size == 1:`), so the test does not set it apart from rank code."""
    return id(call) in _branches(sf)[1].get(id(test), frozenset())


_Branches = tuple[frozenset[int], dict[int, frozenset[int]]]


def _branches(sf: SourceFile) -> _Branches:
    """Once per file, for every `if` and `a if test else b` whose test's direction is known: the
    calls in single-process branches, and per test the calls in the branch the ranks take."""
    cached = cast("_Branches | None", sf.cache.get("choice-branches"))
    if cached is None:
        single: set[int] = set()
        ranks: dict[int, frozenset[int]] = {}
        for node in nodes_below(cast(ast.AST, sf.tree)):
            if isinstance(node, _WITH_BLOCKS):
                for block in _blocks(node):
                    single.update(_calls(_guarded(block)))
            if not isinstance(node, ast.If | ast.IfExp):
                continue
            side = distributed_side(node.test)
            if side is None:
                continue
            body = node.body if isinstance(node, ast.If) else [node.body]
            orelse = node.orelse if isinstance(node, ast.If) else [node.orelse]
            taken, apart = (body, orelse) if side else (orelse, body)
            single.update(_calls(apart))
            ranks[id(node.test)] = frozenset(_calls(taken))
        cached = (frozenset(single), ranks)
        sf.cache["choice-branches"] = cached
    return cached


# The nodes that hold blocks of statements.
_WITH_BLOCKS = (ast.Module, ast.stmt, ast.ExceptHandler, ast.match_case)


def _blocks(node: ast.AST) -> list[list[ast.stmt]]:
    blocks = [getattr(node, f, None) for f in ("body", "orelse", "finalbody")]
    blocks += [h.body for h in getattr(node, "handlers", ())]
    return [b for b in blocks if isinstance(b, list) and b and isinstance(b[0], ast.stmt)]


def _guarded(block: list[ast.stmt]) -> list[ast.stmt]:
    """The statements after `if <count of ranks> != 1: raise/return` (no `else`) in a block:
    only a single process gets past the guard. Only a comparison of a rank count or of the
    launcher's rank is read here: a flag or a state (`if dist.is_initialized(): return`, a
    set-up that may run twice) says nothing about how many ranks pass, and no part of a test
    joined by `and`/`or` is left out."""
    for i, stmt in enumerate(block):
        if (
            isinstance(stmt, ast.If)
            and not stmt.orelse
            and isinstance(stmt.body[-1], ast.Raise | ast.Return)
            and isinstance(stmt.test, ast.Compare)
            and len(stmt.test.ops) == 1
            and _compare(stmt.test) is True
        ):
            return block[i + 1 :]
    return []


def _names(node: ast.expr) -> list[str]:
    """Names, attributes and string keys (`os.environ["WORLD_SIZE"]`, `.get("world_size")`)."""
    keys = []
    for n in ast.walk(node):
        key: ast.expr | None = None
        if isinstance(n, ast.Subscript):
            key = n.slice
        elif isinstance(n, ast.Call) and n.args and _attr(n.func) in ("get", "getenv"):
            key = n.args[0]
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            keys.append(key.value)
    return [*names_in(node), *keys]


def _attr(func: ast.expr) -> str:
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _calls(nodes: list[ast.stmt] | list[ast.expr]) -> list[int]:
    return [id(n) for top in nodes for n in calls_in(top)]


def distributed_side(test: ast.expr, depth: int = 0) -> bool | None:
    """True: the test holds when several ranks run; False: only in one process; None: unknown.
    `not` chains are unwound in a loop and `and`/`or` nesting is read a few levels deep, so a
    contrived test (a thousand `not`s) cannot exhaust the stack."""
    negated = False
    while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        negated, test = not negated, test.operand
    side = _side(test, depth)
    return None if side is None else side != negated


def _side(test: ast.expr, depth: int) -> bool | None:
    if isinstance(test, ast.BoolOp):
        if depth > 8:
            return None
        # Both branches follow the flag only when every part does: `ddp and rank == 0` is
        # false on ranks 1..n too. A CUDA-availability part changes nothing about GPU 0 (with
        # no CUDA no GPU is used), so it is left out.
        parts = [v for v in test.values if "is_available" not in names_in(v)]
        sides = {distributed_side(v, depth + 1) for v in parts}
        return sides.pop() if len(sides) == 1 and None not in sides else None
    if isinstance(test, ast.Name | ast.Attribute | ast.Call):
        return True if any(_FLAG.search(n) for n in names_in(test)) else None
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        return _compare(test)
    return None


def _compare(test: ast.Compare) -> bool | None:
    names, op, right = _names(test.left), test.ops[0], test.comparators[0]
    value = _number(right)
    if any(_COUNT.search(n) for n in names) and value == 1:
        return {ast.Gt: True, ast.NotEq: True, ast.Eq: False, ast.LtE: False}.get(type(op))
    if any(_RANK.search(n) for n in names) and value == -1:  # local_rank -1: no launcher
        return {ast.Eq: False, ast.NotEq: True, ast.Gt: True}.get(type(op))
    return None


def _number(node: ast.expr) -> float | None:
    sign = 1
    while isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        sign, node = -sign, node.operand
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return None if isinstance(node.value, bool) else sign * node.value
    return None
