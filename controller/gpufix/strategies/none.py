"""Nothing to change."""

from __future__ import annotations

from gpufix.engine.context import Candidate, Ctx
from gpufix.strategies.base import Strategy


def evaluate(ctx: Ctx) -> Candidate:
    return Candidate("none", True, "nothing to change", [], "no change")


STRATEGY = Strategy(
    name="none",
    evaluate=evaluate,
    playbook=None,
    watched_files=(),
    disk_need_mib=(0, 0),
    reboot_after_restore=False,
)
