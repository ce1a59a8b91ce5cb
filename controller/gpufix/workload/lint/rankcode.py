"""Which functions of other run modules a multi-rank module runs on every rank (GPF005).

`train.py` starts the process group and calls `ComputeLossOTA(model)` from `utils/loss.py`
outside any rank test: that class is code every rank runs, though its own module starts no
group (yolov7#2146). Calls under a rank/world-size test, from a function the module runs only
on one rank or that starts the ranks, or in a `__main__` block that starts them, do not count.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import cast

from .callsites import PROCESS_GROUP
from .project import Project, SourceFile
from .stmts import calls_in


def names_in(node: ast.AST) -> list[str]:
    """Every name and attribute in an expression (`args.local_rank` -> args, local_rank)."""
    return [
        n.id if isinstance(n, ast.Name) else n.attr
        for n in ast.walk(node)
        if isinstance(n, ast.Name | ast.Attribute)
    ]


# Calls that start processes, by their last name (`mp.spawn`, `Process(target=...)`).
STARTS_PROCESSES = frozenset({"spawn", "Process", "start_processes"})
PROCESS_MODULES = ("torch.multiprocessing.", "multiprocessing.")  # where those calls live


def _launches(sf: SourceFile, node: ast.If) -> bool:
    """A module-level `if __name__ == "__main__":` block that starts the ranks itself: its code
    is the parent's, not a rank's."""
    if "__name__" not in names_in(node.test):
        return False
    names = [sf.names.resolve(n.func) or "" for n in calls_in(node)]
    if any(name in PROCESS_GROUP for name in names):
        return False  # the block is a rank itself (torchrun), whatever helper it starts
    return any(
        name.startswith(PROCESS_MODULES) and name.rsplit(".", 1)[-1] in STARTS_PROCESSES
        for name in names
    )


@dataclass(frozen=True)
class RankCall:
    node: ast.Call
    func: str  # the innermost enclosing function ("" at module level and in class bodies)
    branched: bool  # under an `if` whose test names a rank word
    launched: bool  # in a module-level `__main__` block that starts the ranks itself


def rank_calls(sf: SourceFile, branchy: re.Pattern[str]) -> list[RankCall]:
    """Every call of the module with where it sits, in one walk kept for the run: statements
    are walked one by one (the flags change only at an `if` or a def), their expressions with
    ast.walk."""
    key = f"rank-calls:{branchy.flags}:{branchy.pattern}"
    cached = sf.cache.get(key)
    if cached is None:
        cached = sf.cache[key] = _walk(sf, branchy)
    return cast(list[RankCall], cached)


def _walk(sf: SourceFile, branchy: re.Pattern[str]) -> list[RankCall]:
    out: list[RankCall] = []
    if sf.tree is None:
        return out
    stack: list[tuple[ast.AST, bool, bool, str]] = [(sf.tree, False, False, "")]
    while stack:
        node, branched, launched, func = stack.pop()
        if isinstance(node, ast.If):
            _calls_in(node.test, out, func, branched, launched)
            inner = branched or any(branchy.search(n) for n in names_in(node.test))
            started = launched or (not func and _launches(sf, node))
            stack.extend((c, inner, started, func) for c in (*node.body, *node.orelse))
            continue
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            func = node.name  # its decorators and defaults too, as before
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt | ast.excepthandler | ast.match_case):
                stack.append((child, branched, launched, func))
            else:
                _calls_in(child, out, func, branched, launched)
    return out


def _calls_in(
    expr: ast.AST, out: list[RankCall], func: str, branched: bool, launched: bool
) -> None:
    out.extend(RankCall(n, func, branched, launched) for n in calls_in(expr))


def entries(
    project: Project, sf: SourceFile, branchy: re.Pattern[str], skip: frozenset[str]
) -> dict[SourceFile, set[str]]:
    """Run module -> its top-level names this module calls outside a rank branch."""
    out: dict[SourceFile, set[str]] = {}
    for call in rank_calls(sf, branchy):
        if call.branched or call.launched or (call.func and call.func in skip):
            continue
        name = sf.names.resolve(call.node.func)
        hit = project.split(sf, name) if name else None
        if hit is not None and hit[0] is not sf and hit[1]:
            out.setdefault(hit[0], set()).add(hit[1][0])
    return out
