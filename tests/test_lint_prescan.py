"""CheckContext.prescan fills the same byte-string index as the lazy look-up (checks/__init__.py),
including strings that hold another one (`DistributedDataParallel` holds `ataParallel`)."""

from __future__ import annotations

import ast

from gpufix.workload.lint.checks import CheckContext
from gpufix.workload.lint.libraries import load_table
from gpufix.workload.lint.project import Project, SourceFile
from gpufix.workload.lint.report import Reporter

SOURCES = {
    "a.py": "model = DistributedDataParallel(model)\n",
    "b.py": "model = DataParallel(model)  # 'dp'\n",
    "c.py": "import os\nos.environ['NCCL_P2P_DISABLE'] = '1'\n",
    "d.py": "print('nothing here')\n",
}
NEEDLES = (b"ataParallel", b"DistributedDataParallel", b"'dp'", b"NCCL_", b"NCCL_P2P", b"absent")


def _context() -> CheckContext:
    files = [SourceFile(p, p, "code", t.encode(), ast.parse(t)) for p, t in SOURCES.items()]
    project = Project(files)
    return CheckContext(project, load_table(), Reporter(), tuple(project.parsed()))


def _paths(ctx: CheckContext, needle: bytes) -> set[str]:
    return {sf.path for sf in ctx.with_any((needle,))}


def test_prescan_matches_the_lazy_lookup() -> None:
    lazy, eager = _context(), _context()
    eager.prescan(NEEDLES)
    filled = dict(eager.holding)  # before any look-up: prescan alone filled it
    assert set(filled) == set(NEEDLES)
    by_id = {id(sf): sf.path for sf in eager.checked}
    for needle in NEEDLES:
        assert {by_id[i] for i in filled[needle]} == _paths(lazy, needle), needle
    assert _paths(eager, b"ataParallel") == {"a.py", "b.py"}
    assert _paths(eager, b"DistributedDataParallel") == {"a.py"}
    assert _paths(eager, b"NCCL_P2P") == {"c.py"}
    assert _paths(eager, b"absent") == set()
