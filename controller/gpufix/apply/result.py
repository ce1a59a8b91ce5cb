"""How an apply run was asked for (Options) and how it ended (Outcome per host, Result)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpufix.apply.journal import FINAL_OK
from gpufix.errors import (
    EXIT_CHANGES,
    EXIT_ERROR,
    EXIT_OK,
    EXIT_UNREACHABLE,
    EXIT_VERIFY_FAILED,
)
from gpufix.runner import FACTS_TIMEOUT_S, FORKS, PLAYBOOK_TIMEOUT_S

# The probe verdicts that count as verified; every other verdict fails the host.
HEALTHY = ("healthy",)


@dataclass(frozen=True)
class Options:
    inventory: Path
    check: bool = False
    allow_reboot: bool = False
    rollback_on_failure: bool | None = None  # None: on for plans with a kernel step
    batch: str = "25%"
    canary: bool = True
    max_fail: int = 0  # stop the rollout once more than this many hosts failed
    force: frozenset[str] = frozenset()
    dpkg_wait: int = 120
    reboot_timeout: int = 1200
    verify: bool = True
    probe_vars: dict[str, Any] = field(default_factory=dict)
    step_timeout: int = PLAYBOOK_TIMEOUT_S  # one step's playbook run (--playbook-timeout)
    forks: int = FORKS  # every Ansible run of the apply (--forks)
    facts_timeout: int = FACTS_TIMEOUT_S  # the stale-plan check's gathering (--timeout)
    interim: bool = False  # run the plans' interim steps instead of the permanent ones

    def public(self) -> dict[str, Any]:
        """What the journal records about how the run was asked for."""
        return {
            "inventory": str(self.inventory),
            "check": self.check,
            "allow_reboot": self.allow_reboot,
            "rollback_on_failure": self.rollback_on_failure,
            "batch": self.batch,
            "canary": self.canary,
            "max_fail": self.max_fail,
            "force": sorted(self.force),
            "reboot_timeout": self.reboot_timeout,
            "forks": self.forks,
            "facts_timeout": self.facts_timeout,
            "playbook_timeout": self.step_timeout,
            "verify": self.verify,
            "interim": self.interim,
        }


@dataclass(frozen=True)
class Outcome:
    host: str
    strategy: str
    state: str
    changed: int
    rebooted: bool
    verdict: str | None
    elapsed_s: float
    message: str
    diffs: tuple[dict[str, Any], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out = {
            "host": self.host,
            "strategy": self.strategy,
            "state": self.state,
            "changed": self.changed,
            "rebooted": self.rebooted,
            "verdict": self.verdict,
            "elapsed_s": round(self.elapsed_s, 1),
            "message": self.message,
        }
        if self.diffs:
            out["diffs"] = list(self.diffs)
        return out


@dataclass(frozen=True)
class Result:
    run_id: str | None
    outcomes: tuple[Outcome, ...]
    stopped: bool  # --max-fail ended the rollout early
    resumed: bool
    check: bool
    noop: bool = False  # the plan was already applied in an earlier run: nothing was done
    retry_of: str | None = None  # a new run for hosts an earlier run rolled back

    @property
    def exit_code(self) -> int:
        return EXIT_OK if self.noop else exit_code(self.outcomes)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": "gpufix-apply",
            "version": 1,
            "run": self.run_id,
            "check": self.check,
            "resumed": self.resumed,
            "retry_of": self.retry_of,
            "stopped": self.stopped,
            "already_applied": self.noop,
            "exit_code": self.exit_code,
            "hosts": [o.to_dict() for o in self.outcomes],
        }


def exit_code(outcomes: tuple[Outcome, ...] | list[Outcome]) -> int:
    """The first that applies: 5 a probe after the change was not healthy; 4 a host could
    not be reached; 1 a step or preflight failed; 2 something applied (or would change, in
    check mode); 0 nothing to do."""
    states = [o.state for o in outcomes]
    if any(
        o.state in ("failed", "rolled-back") and o.verdict not in (None, *HEALTHY) for o in outcomes
    ):
        return EXIT_VERIFY_FAILED
    if "unreachable" in states:
        return EXIT_UNREACHABLE
    if any(s in ("failed", "blocked", "rolled-back", "rolling-back") for s in states):
        return EXIT_ERROR
    if any(s in FINAL_OK or s == "would-change" for s in states):
        return EXIT_CHANGES
    return EXIT_OK
