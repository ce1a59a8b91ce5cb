"""GPF009: autograd anomaly detection switched on unconditionally in training code.

`torch.autograd.set_detect_anomaly(True)`, `with torch.autograd.detect_anomaly():` and
Lightning's `Trainer(detect_anomaly=True)`, also through a dict the Trainer gets as `**kwargs`
(trainer_kwargs.py); not when it sits under an `if` on a debug flag or takes its value from a
variable.
"""

from __future__ import annotations

import ast
import re

from ..callsites import CallSite, call_sites, keyword
from ..model import Fix
from ..project import SourceFile
from ..report import replace_node
from ..trainer_kwargs import entries, is_trainer, reaches_trainer
from . import Check, CheckContext

SET = frozenset(
    {"torch.autograd.set_detect_anomaly", "torch.autograd.anomaly_mode.set_detect_anomaly"}
)
CONTEXT = frozenset({"torch.autograd.detect_anomaly", "torch.autograd.anomaly_mode.detect_anomaly"})
_DEBUG = re.compile(r"(?i)debug|anomal|detect|nan_check|check_nan")
TRIGGERS = (b"detect_anomaly",)


def _flagged(tests: tuple[ast.expr, ...]) -> bool:
    names = [
        n.id if isinstance(n, ast.Name) else n.attr
        for t in tests
        for n in ast.walk(t)
        if isinstance(n, ast.Name | ast.Attribute)
    ]
    return any(_DEBUG.search(n) for n in names)


def _switch(sf: SourceFile, site: CallSite) -> ast.expr | None:
    """The literal True that turns anomaly detection on in this call, if any."""
    call = site.node
    if site.name in SET:
        value = call.args[0] if call.args else keyword(call, "mode")
        return value if isinstance(value, ast.Constant) and value.value is True else None
    if is_trainer(site):
        value = keyword(call, "detect_anomaly")
        return value if isinstance(value, ast.Constant) and value.value is True else None
    return None


def run(ctx: CheckContext) -> None:
    for sf in ctx.with_any(TRIGGERS):
        for site in call_sites(sf):
            if _flagged(site.tests):
                continue
            switch = _switch(sf, site)
            if switch is not None:
                fix = replace_node(sf, switch, "False", "Switch anomaly detection off")
            elif site.name in CONTEXT:
                fix = None
            else:
                continue
            _report(ctx, sf, site.node, fix)
        for entry in entries(sf, "detect_anomaly"):
            on = entry.value
            if not (isinstance(on, ast.Constant) and on.value is True) or _flagged(
                entry.where.tests
            ):
                continue
            if reaches_trainer(ctx.project, sf, entry):
                _report(ctx, sf, on, replace_node(sf, on, "False", "Switch anomaly detection off"))


def _report(ctx: CheckContext, sf: SourceFile, node: ast.AST, fix: Fix | None) -> None:
    ctx.reporter.add(
        "GPF009",
        sf,
        node,
        "autograd anomaly detection on in training code: every backward step is "
        "checked (reports show 2x to 1000x slower runs); switch it on from a debug "
        "flag only",
        fix=fix,
    )


CHECK = Check(("GPF009",), run, TRIGGERS)
