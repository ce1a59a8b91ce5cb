"""A strategy is one record: its name, the playbook that carries it out, what apply must know
about it (files to save for rollback, disk it needs, reboot after restore) and how it is judged."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gpufix.engine.context import Candidate, Ctx


@dataclass(frozen=True)
class Strategy:
    name: str
    evaluate: Callable[[Ctx], Candidate]
    # playbooks/<playbook>; None for "none"
    playbook: str | None = None
    # Files the strategy's roles may write: read before the change so rollback can restore
    # them (tests/test_strategies.py checks each against the role's defaults and tasks).
    watched_files: tuple[str, ...] = ()
    # Free space needed in MiB: (/boot, /). Our own estimates, not vendor figures: an Ubuntu
    # kernel image + initramfs + modules is ~100-150 MiB in /boot and ~300 MiB in /; a driver
    # branch ~500 MiB; a CUDA toolkit 3-5 GiB; a CUDA container image 5-10 GiB.
    disk_need_mib: tuple[int, int] = (0, 0)
    # Rollback restores the kernel command line: reboot again after restoring.
    reboot_after_restore: bool = False
