"""Which functions of other run modules a multi-rank module runs on every rank (GPF005).

`train.py` starts the process group and calls `ComputeLossOTA(model)` from `utils/loss.py`
outside any rank test: that class is code every rank runs, though its own module starts no
group (yolov7#2146). Calls under a rank/world-size test, from a function the module runs only
on one rank or that starts the ranks, or in a `__main__` block that starts them, do not count.
"""

from __future__ import annotations

import ast
import re

from .callsites import PROCESS_GROUP
from .project import Project, SourceFile


def names_in(node: ast.AST) -> list[str]:
    """Every name and attribute in an expression (`args.local_rank` -> args, local_rank)."""
    return [
        n.id if isinstance(n, ast.Name) else n.attr
        for n in ast.walk(node)
        if isinstance(n, ast.Name | ast.Attribute)
    ]


# Calls that start processes, by their last name (`mp.spawn`, `Process(target=...)`).
STARTS_PROCESSES = frozenset({"spawn", "Process", "start_processes"})
_STARTERS = ("torch.multiprocessing.", "multiprocessing.")


def _launches(sf: SourceFile, node: ast.If) -> bool:
    """A module-level `if __name__ == "__main__":` block that starts the ranks itself: its code
    is the parent's, not a rank's."""
    if "__name__" not in names_in(node.test):
        return False
    names = [sf.names.resolve(n.func) or "" for n in ast.walk(node) if isinstance(n, ast.Call)]
    if any(name in PROCESS_GROUP for name in names):
        return False  # the block is a rank itself (torchrun), whatever helper it starts
    return any(
        name.startswith(_STARTERS) and name.rsplit(".", 1)[-1] in STARTS_PROCESSES for name in names
    )


def entries(
    project: Project, sf: SourceFile, branchy: re.Pattern[str], skip: set[str]
) -> dict[SourceFile, set[str]]:
    """Run module -> its top-level names this module calls outside a rank branch."""
    out: dict[SourceFile, set[str]] = {}
    if sf.tree is None:
        return out
    stack: list[tuple[ast.AST, bool, str]] = [(sf.tree, False, "")]
    while stack:
        node, branched, func = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            func = node.name
        elif isinstance(node, ast.If):
            inner = (
                branched
                or any(branchy.search(n) for n in names_in(node.test))
                or (not func and _launches(sf, node))
            )
            stack.append((node.test, branched, func))
            stack.extend((c, inner, func) for c in (*node.body, *node.orelse))
            continue
        elif isinstance(node, ast.Call) and not branched and not (func and func in skip):
            name = sf.names.resolve(node.func)
            hit = project.split(sf, name) if name else None
            if hit is not None and hit[0] is not sf and hit[1]:
                out.setdefault(hit[0], set()).add(hit[1][0])
        stack.extend((c, branched, func) for c in ast.iter_child_nodes(node))
    return out
