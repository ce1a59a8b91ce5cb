"""Which branch of `a if test else b` the ranks of a distributed run take (GPF005): the test's
direction, read from how such code names its flags. A test is "distributed" when it holds with
several ranks (`ddp`, `is_distributed`, `dist.is_initialized()`, `world_size > 1`,
`local_rank != -1`), "single" when it holds only in one process (`not ddp`, `world_size == 1`,
`local_rank == -1`), and unknown otherwise, in which case neither branch is left alone.
"""

from __future__ import annotations

import ast
import re
from typing import cast

from .project import SourceFile
from .rankcode import names_in

_FLAG = re.compile(r"(?i)distributed|ddp|multi_?gpu|is_initialized")
_COUNT = re.compile(
    r"(?i)world_size|nprocs|num_processes"
)  # ranks, not GPUs (n_gpu > 1: DataParallel)
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
        for node in ast.walk(cast(ast.AST, sf.tree)):
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


def _calls(nodes: list[ast.stmt] | list[ast.expr]) -> list[int]:
    return [id(n) for top in nodes for n in ast.walk(top) if isinstance(n, ast.Call)]


def distributed_side(test: ast.expr) -> bool | None:
    """True: the test holds when several ranks run; False: only in one process; None: unknown."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        side = distributed_side(test.operand)
        return None if side is None else not side
    if isinstance(test, ast.BoolOp):
        sides = [distributed_side(v) for v in test.values]
        want = isinstance(test.op, ast.And)  # `and`: one distributed part decides
        if want in sides and (not want) not in sides:
            return want
        return None
    if isinstance(test, ast.Name | ast.Attribute | ast.Call):
        return True if any(_FLAG.search(n) for n in names_in(test)) else None
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        return _compare(test)
    return None


def _compare(test: ast.Compare) -> bool | None:
    names, op, right = names_in(test.left), test.ops[0], test.comparators[0]
    value = _number(right)
    if any(_COUNT.search(n) for n in names) and value == 1:
        return {ast.Gt: True, ast.NotEq: True, ast.Eq: False, ast.LtE: False}.get(type(op))
    if any(_RANK.search(n) for n in names) and value == -1:  # local_rank -1: no launcher
        return {ast.Eq: False, ast.NotEq: True, ast.Gt: True}.get(type(op))
    return None


def _number(node: ast.expr) -> float | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return None if isinstance(node.value, bool) else node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _number(node.operand)
        return None if inner is None else -inner
    return None
