"""Carry out saved plans across a fleet: stale-plan check, preflight, rolling batches with a
canary, steps, reboot, probe, rollback on failure; every transition journaled first."""

from __future__ import annotations

import base64
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpufix import runner, strategies
from gpufix.apply import hostcheck as safety
from gpufix.apply.journal import FINAL_OK, Journal, next_action
from gpufix.engine.plan import Plan, Step, digest
from gpufix.errors import (
    EXIT_CHANGES,
    EXIT_ERROR,
    EXIT_OK,
    EXIT_UNREACHABLE,
    EXIT_VERIFY_FAILED,
    GpufixError,
    InvalidInput,
)
from gpufix.paths import content_root

# Hosts a probe verdict counts as verified; every other verdict fails the host.
HEALTHY = ("healthy",)

Report = Callable[[str, str], None]


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
    reboot_timeout: int = 600
    verify: bool = True
    probe_vars: dict[str, Any] = field(default_factory=dict)
    step_timeout: int = 3600

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
            "verify": self.verify,
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

    def to_dict(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "strategy": self.strategy,
            "state": self.state,
            "changed": self.changed,
            "rebooted": self.rebooted,
            "verdict": self.verdict,
            "elapsed_s": round(self.elapsed_s, 1),
            "message": self.message,
        }


@dataclass(frozen=True)
class Result:
    run_id: str | None
    outcomes: tuple[Outcome, ...]
    stopped: bool  # --max-fail ended the rollout early
    resumed: bool
    check: bool
    noop: bool = False  # the plan was already applied in an earlier run: nothing was done

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
            "stopped": self.stopped,
            "already_applied": self.noop,
            "exit_code": self.exit_code,
            "hosts": [o.to_dict() for o in self.outcomes],
        }


def exit_code(outcomes: tuple[Outcome, ...] | list[Outcome]) -> int:
    """The first that applies: 5 a probe after the change was not healthy; 4 a host could
    not be reached; 1 a step or preflight failed; 2 something applied; 0 nothing to do."""
    states = [o.state for o in outcomes]
    if any(
        o.state in ("failed", "rolled-back") and o.verdict not in (None, *HEALTHY) for o in outcomes
    ):
        return EXIT_VERIFY_FAILED
    if "unreachable" in states:
        return EXIT_UNREACHABLE
    if any(s in ("failed", "blocked", "rolled-back", "rolling-back") for s in states):
        return EXIT_ERROR
    if any(s in FINAL_OK for s in states):
        return EXIT_CHANGES
    return EXIT_OK


# -- batches ------------------------------------------------------------------------------
def parse_batch(spec: str, total: int) -> int:
    """'3' -> 3 hosts, '25%' -> ceil(25% of total), at least 1."""
    s = str(spec).strip()
    try:
        if s.endswith("%"):
            pct = float(s[:-1])
            if not 0 < pct <= 100:
                raise ValueError
            return max(1, math.ceil(total * pct / 100))
        n = int(s)
        if n < 1:
            raise ValueError
        return n
    except ValueError:
        raise InvalidInput(
            f"bad --batch {spec!r}: give a host count (2) or a percentage (25%)"
        ) from None


def batches(hosts: list[str], spec: str, *, canary: bool = True) -> list[list[str]]:
    """Rolling batches: a canary of one host first, then batches of `spec`."""
    if not hosts:
        return []
    size = parse_batch(spec, len(hosts))
    out: list[list[str]] = []
    rest = list(hosts)
    if canary and len(rest) > 1:
        out.append([rest.pop(0)])
    while rest:
        out.append(rest[:size])
        rest = rest[size:]
    return out


# -- stale plans --------------------------------------------------------------------------
def plans_digest(plans: list[Plan]) -> str:
    return digest([p.to_dict() for p in plans])


def _facts_changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    return sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))


def stale_reason(plan: Plan, facts: dict[str, Any], kb_digest: str) -> str | None:
    """Why `plan` no longer fits this host's facts and knowledge base, or None when it does."""
    from gpufix.engine.decide import stable_facts

    if plan.kb_digest != kb_digest:
        return "the knowledge base changed since the plan was made"
    if plan.facts_digest in (digest(stable_facts(facts)), digest(facts)):
        return None
    old = plan.extra.get("facts")
    if isinstance(old, dict):
        keys = _facts_changes(stable_facts(old), stable_facts(facts))
        if keys:
            return "its facts changed since the plan was made: " + ", ".join(keys)
    return "its facts changed since the plan was made"


def check_fresh(
    plans: list[Plan], inventory: Path, progress: Report | None = None
) -> dict[str, str]:
    """Re-gather facts and refuse a stale plan. Returns {host: unreachable message}."""
    from gpufix.engine import kb
    from gpufix.facts import collect

    kb_digest = str(kb.load().digest)
    envs = sorted({e for p in plans for e in p.extra.get("python_envs", [])})
    got = collect.gather(
        ",".join(p.host for p in plans), inventory, python_envs=envs or None, progress=progress
    )
    unreachable: dict[str, str] = {}
    stale: list[str] = []
    by_host = {g.host: g for g in got}
    for p in plans:
        g = by_host.get(p.host)
        if g is None or g.snapshot is None:
            unreachable[p.host] = g.error if g else "no facts gathered"
            continue
        why = stale_reason(p, dict(g.snapshot.facts), kb_digest)
        if why:
            stale.append(f"{p.host}: {why}")
    if stale:
        raise InvalidInput(
            "stale plan, refusing to apply (" + "; ".join(stale) + "): re-plan with `gpufix plan`"
        )
    return unreachable


# -- validation -----------------------------------------------------------------------------
def validate(plans: list[Plan], inventory: Path) -> None:
    from gpufix.inventory import resolve

    if not plans:
        raise InvalidInput("the plan file holds no plans")
    names = [p.host for p in plans]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise InvalidInput(f"the plan names host(s) more than once: {', '.join(dup)}")
    for t in resolve(",".join(names), inventory):
        if t.snapshot is not None:
            raise InvalidInput(
                f"{t.name} is a recorded snapshot ({t.snapshot.name}), not a live host: "
                "apply needs a host Ansible can reach"
            )
    book_dir = content_root() / "playbooks"
    for p in plans:
        if p.strategy not in strategies.REGISTRY:
            raise InvalidInput(f"{p.host}: unknown strategy {p.strategy!r} in the plan")
        for s in p.steps:
            if "/" in s.playbook or not (book_dir / s.playbook).is_file():
                raise InvalidInput(
                    f"{p.host}: the plan's playbook {s.playbook!r} is not in playbooks/"
                )


def _kernel_step(plan: Plan) -> bool:
    return plan.strategy == "kernel-upgrade" or any(
        s.playbook == strategies.get("kernel-upgrade").playbook for s in plan.steps
    )


def _needs_reboot(plan: Plan) -> bool:
    return plan.reboot_required or any(s.reboot for s in plan.steps)


def _role_reboots(plan: Plan) -> bool:
    """Roles that take a *_reboot_allowed variable reboot themselves (the kernel role boots
    the new kernel once, checks it and only then makes it the default)."""
    return any(k.endswith("_reboot_allowed") for s in plan.steps for k in s.vars)


def step_vars(step: Step, *, allow_reboot: bool, check: bool) -> dict[str, Any]:
    """The plan's variables, with every *_reboot_allowed gated by --allow-reboot."""
    out = dict(step.vars)
    for k, v in step.vars.items():
        if k.endswith("_reboot_allowed"):
            out[k] = bool(v) and allow_reboot and not check
    return out


# -- the run ------------------------------------------------------------------------------
class Applier:
    """One apply run over a list of plans (one per host)."""

    def __init__(
        self,
        plans: list[Plan],
        opts: Options,
        report: Report | None = None,
        *,
        fresh_facts: bool = False,
    ) -> None:
        self.fresh_facts = fresh_facts  # plans were made from facts gathered just now
        self.plans = {p.host: p for p in plans}
        self.order = [p.host for p in plans]
        self.opts = opts
        self.report = report or (lambda host, msg: None)
        self.t0: dict[str, float] = {}
        self.journal: Journal | None = None
        # without a journal (check mode) states and change counts live here
        self._mem: dict[str, tuple[str, str]] = {}
        self._changed: dict[str, int] = {}

    # entry point
    def run(self, plan_file: str | None = None) -> Result:
        plans = [self.plans[h] for h in self.order]
        validate(plans, self.opts.inventory)
        pd = plans_digest(plans)
        existing = None if self.opts.check else Journal.find_for_plan(pd)
        resumed = False
        if existing is not None:
            self.journal = self._resume(existing)
            resumed = True
            actions = {h: next_action(self.journal.host(h)) for h in self.order}
            for h in self.order:
                if self.journal.host(h)["state"] == "reboot-pending" and self.opts.allow_reboot:
                    # a role that reboots itself does it when its steps run again
                    actions[h] = ("step", 0) if _role_reboots(self.plans[h]) else ("reboot", -1)
            if all(a == "skip" for a, _ in actions.values()):
                self.journal.finish("complete", self._summary())
                return self._result(resumed=True, stopped=False, noop=True)
            fresh = [h for h in self.order if self.journal.host(h)["state"] == "pending"]
        else:
            actions = {h: ("step", 0) for h in self.order}
            fresh = list(self.order)
        unreachable = (
            check_fresh([self.plans[h] for h in fresh], self.opts.inventory, self.report)
            if fresh and not self.fresh_facts
            else {}
        )
        if self.journal is None and not self.opts.check:
            self.journal = Journal.create(
                [self.plans[h].to_dict() for h in self.order],
                plan_digest=pd,
                options=self.opts.public(),
                plan_file=plan_file,
            )
        try:
            stopped = self._rollout(actions, unreachable)
        except KeyboardInterrupt:
            if self.journal is not None:
                self.journal.finish("interrupted")
                raise GpufixError(
                    f"interrupted: run {self.journal.run_id} records where each host stands "
                    "(`gpufix status`); apply the same plan again to resume"
                ) from None
            raise
        if self.journal is not None:
            self.journal.finish("stopped" if stopped else "complete", self._summary())
        return self._result(resumed=resumed, stopped=stopped)

    def _resume(self, j: Journal) -> Journal:
        if j.state == "running":
            raise GpufixError(
                f"run {j.run_id} of this plan is still running (pid {j.meta.get('pid')})"
            )
        refused = [
            f"{h} is {j.host(h)['state']} ({j.host(h).get('reason') or 'see gpufix status'})"
            for h in j.hosts
            if next_action(j.host(h))[0] == "refuse"
        ]
        if refused:
            raise GpufixError(
                f"run {j.run_id} of this plan cannot resume: "
                + "; ".join(refused)
                + f": `gpufix rollback {j.run_id} HOST` or re-plan"
            )
        self.report("*", f"resuming run {j.run_id} ({j.state})")
        j.claim()
        return j

    def _rollout(self, actions: dict[str, tuple[str, int]], unreachable: dict[str, str]) -> bool:
        failures = 0
        work: list[str] = []
        for h in self.order:
            act, _ = actions[h]
            if h in unreachable:
                self._set(h, "unreachable", unreachable[h])
                failures += 1
            elif act == "skip":
                continue
            elif act == "step" and not self.plans[h].changes:
                self._set(h, "skipped", "nothing to do")
            else:
                work.append(h)
        groups = batches(work, self.opts.batch, canary=self.opts.canary)
        for n, group in enumerate(groups):
            if failures > self.opts.max_fail:
                rest = [h for g in groups[n:] for h in g]
                for h in rest:
                    self._set(
                        h,
                        "skipped",
                        f"left untouched: the rollout stopped after {failures} failure(s) "
                        f"(--max-fail {self.opts.max_fail})",
                    )
                return True
            self.report("*", f"batch {n + 1}/{len(groups)}: {', '.join(group)}")
            failures += self._batch(group, actions)
        return False

    # one batch ---------------------------------------------------------------------------
    def _batch(self, hosts: list[str], actions: dict[str, tuple[str, int]]) -> int:
        for h in hosts:
            self.t0[h] = time.monotonic()
        stepping = [h for h in hosts if actions[h][0] == "step"]
        alive = self._preflight(stepping)
        alive += [h for h in hosts if actions[h][0] != "step"]
        # hosts with the same steps from the same point run together (one ansible run per step)
        keyed: dict[str, list[str]] = {}
        for h in alive:
            act, start = actions[h]
            steps = self.plans[h].steps[start:] if act == "step" else []
            key = json.dumps(
                [act, [[s.playbook, s.vars] for s in steps]], sort_keys=True, default=str
            )
            keyed.setdefault(key, []).append(h)
        for group in keyed.values():
            act, start = actions[group[0]]
            ok = group
            if act == "step":
                ok = self._steps(group, start)
                ok = self._after_steps(ok)
            if act in ("step", "reboot"):
                ok = self._reboot(ok)
            self._verify(ok)
        return sum(1 for h in hosts if self._state(h) not in (*FINAL_OK, "skipped"))

    def _preflight(self, hosts: list[str]) -> list[str]:
        if not hosts:
            return []
        for h in hosts:
            self._set(h, "preflight")
        want = {
            h: {
                "strategy": self.plans[h].strategy,
                "kernel_step": _kernel_step(self.plans[h]),
                "files": list(strategies.get(self.plans[h].strategy).watched_files),
            }
            for h in hosts
        }
        res = safety.run_preflight(
            want,
            self.opts.inventory,
            force=self.opts.force,
            dpkg_wait=self.opts.dpkg_wait,
            progress=self.report,
        )
        ok = []
        for h in hosts:
            pf = res[h]
            for w in pf.warnings:
                self.report(h, "warning: " + w)
            if pf.unreachable:
                self._set(h, "unreachable", pf.summary())
            elif not pf.ok:
                self._set(h, "blocked", "preflight: " + pf.summary())
            else:
                if self.journal is not None and not self.journal.host(h).get("before"):
                    self.journal.update(h, before=pf.report)
                ok.append(h)
        return ok

    def _steps(self, hosts: list[str], start: int) -> list[str]:
        ok = list(hosts)
        steps = self.plans[hosts[0]].steps
        for i in range(start, len(steps)):
            step = steps[i]
            if not ok:
                break
            for h in ok:
                self._step_started(h, i)
                self.report(h, f"step {i + 1}/{len(steps)}: {step.playbook}")
            res = runner.run_playbook(
                step.playbook,
                self.opts.inventory,
                limit=",".join(ok),
                extravars=step_vars(
                    step, allow_reboot=self.opts.allow_reboot, check=self.opts.check
                ),
                check=self.opts.check,
                timeout=self.opts.step_timeout,
                progress=self.report,
            )
            _raise_if_canceled(res)
            still = []
            for h in ok:
                hr = res.hosts.get(h) or runner.HostResult(
                    host=h, status="failed", message=f"no result ({res.status})"
                )
                files = [r["path"] for r in hr.results if r.get("path")]
                good = hr.status == "ok"
                self._step_finished(h, i, good, hr.changed, files, hr.message)
                if any(r.get("rebooted") for r in hr.results) and self.journal is not None:
                    self.journal.update(h, rebooted=True)
                if hr.status == "unreachable":
                    self._set(h, "unreachable", f"lost during {step.playbook}: {hr.message}")
                elif not good and _lost_in_reboot(hr):
                    # a role's own reboot that did not come back: nothing can be rolled back
                    if self.journal is not None:
                        self.journal.update(h, rebooted=True)
                    self._set(
                        h,
                        "unreachable",
                        f"did not come back from the reboot in {step.playbook}: {hr.message}",
                    )
                elif not good:
                    self._fail(h, f"{step.playbook} failed: {hr.message}", verdict=None)
                else:
                    still.append(h)
            ok = still
        return ok

    def _after_steps(self, hosts: list[str]) -> list[str]:
        """Record what the host looks like after the steps (for the journal and rollback)."""
        if self.opts.check or self.journal is None or not hosts:
            return hosts
        res = safety.run_preflight(
            {h: {"strategy": self.plans[h].strategy} for h in hosts},
            self.opts.inventory,
            dpkg_wait=0,
            force=safety.FORCEABLE,
        )
        for h in hosts:
            pf = res[h]
            if not pf.unreachable:
                self.journal.update(h, after=pf.report)
        return hosts

    def _changed_any(self, h: str) -> bool:
        if self.journal is None:
            return False
        return any(s.get("changed") for s in self.journal.host(h)["steps"]) or bool(
            self.journal.host(h).get("changed_any")
        )

    def _reboot(self, hosts: list[str]) -> list[str]:
        need = [
            h
            for h in hosts
            if _needs_reboot(self.plans[h])
            and self._changed_any(h)
            # the role rebooted (or found nothing to reboot for) by itself
            and not (_role_reboots(self.plans[h]) and self.opts.allow_reboot)
        ]
        go = []
        for h in hosts:
            if h not in need:
                continue
            if self.opts.check:
                continue
            if not self.opts.allow_reboot:
                self._set(
                    h, "reboot-pending", "the change needs a reboot: re-run with --allow-reboot"
                )
                continue
            go.append(h)
        if not go:
            return [h for h in hosts if h not in need or self.opts.check]
        for h in go:
            self.journal.update(h, changed_any=True)  # type: ignore[union-attr]
            self._set(h, "rebooting")
        res = runner.run_playbook(
            "reboot.yml",
            self.opts.inventory,
            limit=",".join(go),
            extravars={"gpufix_reboot_timeout": self.opts.reboot_timeout},
            timeout=self.opts.reboot_timeout + 300,
            progress=self.report,
        )
        _raise_if_canceled(res)
        back = [h for h in hosts if h not in need]
        for h in go:
            hr = res.hosts.get(h)
            if hr is not None and hr.status == "ok":
                self.journal.update(h, rebooted=True)  # type: ignore[union-attr]
                back.append(h)
                continue
            msg = hr.message if hr else f"no result ({res.status})"
            if hr is not None and "not rebooting" in msg:
                # the playbook refused before rebooting (no NVIDIA module for the new kernel)
                self._fail(h, msg, verdict=None)
            elif hr is None or hr.status == "unreachable" or "Timed out" in msg:
                self.journal.update(h, rebooted=True)  # type: ignore[union-attr]
                self._set(
                    h,
                    "unreachable",
                    f"did not come back within {self.opts.reboot_timeout} s of the reboot: {msg}",
                )
            else:
                self._fail(h, f"reboot failed: {msg}", verdict=None)
        return back

    def _verify(self, hosts: list[str]) -> None:
        for h in hosts:
            if self._state(h) in ("reboot-pending", "failed", "unreachable"):
                continue
            if self.opts.check or not self.opts.verify:
                self._set(h, "applied", "check mode: nothing changed" if self.opts.check else "")
                continue
            self._set(h, "verifying")
        todo = [h for h in hosts if self._state(h) == "verifying"]
        if not todo:
            return
        res = runner.run_playbook(
            "probe.yml",
            self.opts.inventory,
            limit=",".join(todo),
            extravars=dict(self.opts.probe_vars),
            timeout=self.opts.reboot_timeout + 600,
            progress=self.report,
        )
        _raise_if_canceled(res)
        for h in todo:
            hr = res.hosts.get(h)
            verdict = (hr.data.get("gpufix_probe_verdict") if hr else None) or {}
            if hr is not None and hr.status == "unreachable":
                self._set(h, "unreachable", f"lost before the probe: {hr.message}")
                continue
            v = verdict.get("verdict") if isinstance(verdict, dict) else None
            if self.journal is not None:
                self.journal.add_verdict(h, "after-apply", _verdict_summary(verdict, hr))
            if v in HEALTHY:
                self._set(h, "healthy", "probe: healthy")
            else:
                why = (verdict.get("error") if isinstance(verdict, dict) else None) or (
                    hr.message if hr else "no result"
                )
                self._fail(h, f"probe verdict {v or 'none'}: {why}", verdict=v or "none")

    # failure and rollback ----------------------------------------------------------------
    def _fail(self, h: str, reason: str, verdict: str | None) -> None:
        self._set(h, "failed", reason)
        if self.journal is None:
            return
        if verdict is not None:
            self.journal.update(h, failed_verdict=verdict)
        on = self.opts.rollback_on_failure
        if on is None:
            on = _kernel_step(self.plans[h])
        if on:
            self.report(h, "rolling back")
            rollback(self.journal, h, self.opts.inventory, report=self.report)

    # journal helpers -------------------------------------------------------------------
    def _set(self, h: str, state: str, reason: str = "") -> None:
        if reason:
            self.report(h, f"{state}: {reason}")
        if self.journal is not None:
            self.journal.set_state(h, state, reason)
        self._mem[h] = (state, reason)

    def _state(self, h: str) -> str:
        if self.journal is not None:
            return str(self.journal.host(h)["state"])
        return self._mem.get(h, ("pending", ""))[0]

    def _step_started(self, h: str, i: int) -> None:
        if self.journal is not None:
            self.journal.step_started(h, i)

    def _step_finished(
        self, h: str, i: int, ok: bool, changed: int, files: list[str], msg: str
    ) -> None:
        self._changed[h] = self._changed.get(h, 0) + changed
        if self.journal is not None:
            self.journal.step_finished(h, i, ok=ok, changed=changed, files=files, message=msg)
            if changed:
                self.journal.update(h, changed_any=True)

    def _summary(self) -> dict[str, Any]:
        return {o.host: o.state for o in self._outcomes()}

    def _outcomes(self) -> list[Outcome]:
        out = []
        for h in self.order:
            plan = self.plans[h]
            if self.journal is not None:
                rec = self.journal.host(h)
                state, reason = rec["state"], rec.get("reason", "")
                changed = sum(int(s.get("changed") or 0) for s in rec["steps"])
                rebooted = bool(rec.get("rebooted"))
                verdicts = rec.get("verdicts") or []
                verdict = verdicts[-1].get("verdict") if verdicts else rec.get("failed_verdict")
            else:
                state, reason = self._mem.get(h, ("pending", ""))
                changed = self._changed.get(h, 0)
                rebooted, verdict = False, None
            start = self.t0.get(h)
            out.append(
                Outcome(
                    host=h,
                    strategy=plan.strategy,
                    state=state,
                    changed=changed,
                    rebooted=rebooted,
                    verdict=verdict,
                    elapsed_s=(time.monotonic() - start) if start else 0.0,
                    message=reason,
                )
            )
        return out

    def _result(self, *, resumed: bool, stopped: bool, noop: bool = False) -> Result:
        if noop and self.journal is not None:
            self.report("*", f"plan already applied in run {self.journal.run_id}: nothing to do")
        return Result(
            run_id=self.journal.run_id if self.journal else None,
            outcomes=tuple(self._outcomes()),
            stopped=stopped,
            resumed=resumed,
            check=self.opts.check,
            noop=noop,
        )


def _raise_if_canceled(res: runner.RunResult) -> None:
    """ansible-runner turns Ctrl-C / SIGTERM into a canceled job: treat it as an interrupt."""
    if res.status == "canceled":
        raise KeyboardInterrupt


def _lost_in_reboot(hr: runner.HostResult) -> bool:
    """ansible.builtin.reboot gave up waiting: the host went down and did not come back."""
    return "Timed out waiting for" in hr.message and any(
        "reboot" in str(r.get("task", "")).lower() for r in hr.results if r.get("failed")
    )


def _verdict_summary(verdict: Any, hr: runner.HostResult | None) -> dict[str, Any]:
    if not isinstance(verdict, dict) or not verdict:
        return {"verdict": None, "error": hr.message if hr else "no result"}
    keep = ("verdict", "backend", "world_size", "stalled", "error", "causes", "deadline_s")
    return {k: verdict.get(k) for k in keep if k in verdict}


def apply(
    plans: list[Plan],
    opts: Options,
    *,
    plan_file: str | None = None,
    report: Report | None = None,
    fresh_facts: bool = False,
) -> Result:
    """Apply plans (one per host). Raises GpufixError for refusals (stale plan, busy run).

    fresh_facts: the plans were made from facts gathered just now (apply --strategy), so the
    stale-plan check does not gather them again.
    """
    return Applier(plans, opts, report, fresh_facts=fresh_facts).run(plan_file)


# -- rollback -----------------------------------------------------------------------------
def rollback_vars(rec: dict[str, Any]) -> dict[str, Any]:
    """Extravars for playbooks/rollback.yml from a host's journal record (pure)."""
    before = rec.get("before") or {}
    after = rec.get("after") or {}
    pkgs_before: dict[str, str] = before.get("packages") or {}
    pkgs_after: dict[str, str] = after.get("packages") or {}
    install = {n: v for n, v in pkgs_before.items() if pkgs_after and pkgs_after.get(n) != v}
    remove = sorted(n for n in pkgs_after if n not in pkgs_before)
    holds_before = set(before.get("holds") or [])
    holds_after = set(after["holds"]) if "holds" in after else holds_before
    files = {}
    written = {f for s in rec.get("steps") or [] for f in s.get("files") or []}
    for path, saved in (before.get("files") or {}).items():
        if not isinstance(saved, dict):
            continue
        after_saved = (after.get("files") or {}).get(path)
        if path in written or (after_saved is not None and after_saved != saved):
            files[path] = saved
    kernel_before = (before.get("kernel") or {}).get("running")
    return {
        "gpufix_rollback_install": install,
        "gpufix_rollback_remove": remove,
        "gpufix_rollback_unhold": sorted(holds_after - holds_before),
        "gpufix_rollback_hold": sorted(holds_before - holds_after),
        "gpufix_rollback_files": files,
        "gpufix_rollback_kernel": kernel_before or "",
        "gpufix_rollback_reboot": bool(rec.get("rebooted")),
        # a restored kernel command line takes effect only at the next boot
        "gpufix_rollback_reboot_after": bool(rec.get("rebooted"))
        and _reboot_after_restore(str(rec.get("strategy"))),
    }


def _reboot_after_restore(name: str) -> bool:
    s = strategies.REGISTRY.get(name)
    return bool(s and s.reboot_after_restore)


def rollback(
    journal: Journal,
    host: str,
    inventory: Path,
    *,
    report: Report | None = None,
    reboot_timeout: int = 600,
) -> str:
    """Replay a host's journal backwards. Returns the host's new state."""
    rec = journal.host(host)
    if rec["state"] == "pending" or not any(s.get("state") != "pending" for s in rec["steps"]):
        raise InvalidInput(f"{host} had no step run in {journal.run_id}: nothing to roll back")
    if not rec.get("before"):
        raise GpufixError(
            f"{host}: the journal of {journal.run_id} has no 'before' state (preflight did not "
            "finish), so there is nothing to restore from"
        )
    ev = rollback_vars(rec)
    journal.set_state(host, "rolling-back", "restoring packages, holds and files")
    res = runner.run_playbook(
        "rollback.yml",
        inventory,
        limit=host,
        extravars={**ev, "gpufix_reboot_timeout": reboot_timeout},
        timeout=reboot_timeout + 1800,
        progress=report,
    )
    hr = res.hosts.get(host)
    done = {
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "install": ev["gpufix_rollback_install"],
        "remove": ev["gpufix_rollback_remove"],
        "files": sorted(ev["gpufix_rollback_files"]),
        "rebooted": ev["gpufix_rollback_reboot"],
    }
    if hr is not None and hr.status == "ok":
        journal.update(host, rollback={**done, "ok": True})
        journal.set_state(host, "rolled-back", "restored from the journal")
        return "rolled-back"
    msg = hr.message if hr else f"no result ({res.status})"
    journal.update(host, rollback={**done, "ok": False, "message": msg})
    journal.set_state(host, "failed", f"rollback failed: {msg}")
    return "failed"


def file_content(saved: dict[str, Any]) -> bytes:
    return base64.b64decode(saved.get("content_b64") or "")
