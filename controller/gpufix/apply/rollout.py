"""Carry out plans across a fleet: check the request, lock the hosts, refuse stale plans, then
rolling batches with a canary (gpufix.apply.phases); every transition journaled first.

A run is resumed when the same plan is applied again; hosts a run rolled back are retried in a
new run. Ctrl-C or SIGTERM ends the run `interrupted` (exit 130): nothing starts after it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from gpufix import runner, strategies
from gpufix.apply import freshness, hostlock, request, targets
from gpufix.apply.batches import batches, parse_batch
from gpufix.apply.hostlock import HostLock
from gpufix.apply.journal import FileJournal, Journal, next_action, step_ran
from gpufix.apply.locks import HostLocks, check_host_name
from gpufix.apply.phases import Phases, role_reboots
from gpufix.apply.result import Options, Outcome, Result
from gpufix.apply.rolevars import check_vars
from gpufix.engine.plan import Plan, digest
from gpufix.errors import GpufixError, InvalidInput

__all__ = ["Options", "Result", "apply", "batches", "parse_batch", "validate"]


def plans_digest(plans: list[Plan], kind: str = "permanent") -> str:
    d = digest([p.to_dict() for p in plans])
    return d if kind == "permanent" else f"{d}:{kind}"


def work_plan(plan: Plan, interim: bool) -> Plan:
    """The plan whose steps this run carries out: the permanent fix, or the interim one."""
    if not interim:
        return plan
    if plan.interim is None:
        return replace(plan, strategy="none", steps=[], reboot_required=False)
    # "complete" speaks of the permanent steps' parameters; the engine makes an interim only
    # when its own steps are feasible (engine/explain.py interim_for)
    extra = {k: v for k, v in plan.extra.items() if k != "complete"}
    return replace(
        plan,
        strategy=plan.interim.strategy,
        steps=list(plan.interim.steps),
        reboot_required=False,
        extra=extra,
    )


def validate(plans: list[Plan], inventory: Path) -> None:
    """What a run needs before anything is gathered or changed: live hosts, once each, known
    strategies and playbooks, and step variables the playbooks' specs accept."""
    from gpufix.inventory import resolve

    if not plans:
        raise InvalidInput("the plan file holds no plans")
    names = [p.host for p in plans]
    for n in names:
        check_host_name(n)
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise InvalidInput(f"the plan names host(s) more than once: {', '.join(dup)}")
    found = resolve(",".join(names), inventory)
    for n in names:
        # each plan's host is one inventory host of that name, not a group or pattern that
        # would widen the run (freshness would gather every host of a group named like a host)
        if not any(t.name == n for t in found):
            try:
                resolve(n, inventory)
            except InvalidInput:
                raise InvalidInput(
                    f"{n!r} is not in {inventory}: apply with the inventory the plan was made "
                    "for (-i)"
                ) from None
            raise InvalidInput(
                f"{n!r} is not a host of {inventory} but a group or pattern: a plan is for one "
                "host; plan each host (`gpufix plan GROUP -o PLANFILE` plans every host of it)"
            )
    if len(found) != len(names):
        extra = sorted({t.name for t in found} - set(names))
        raise InvalidInput(
            f"the plan's host names also match {', '.join(extra[:5])} in {inventory}: a plan is "
            "for one host; plan each host"
        )
    for t in found:
        if t.snapshot is not None:
            raise InvalidInput(
                f"{t.name} is a recorded snapshot ({t.snapshot.name}), not a live host: "
                "apply needs a host Ansible can reach"
            )
    books = {s.playbook for s in strategies.REGISTRY.values() if s.playbook}
    for p in plans:
        if p.strategy not in strategies.REGISTRY:
            raise InvalidInput(f"{p.host}: unknown strategy {p.strategy!r} in the plan")
        for i, s in enumerate(p.steps):
            if s.playbook not in books:
                raise InvalidInput(
                    f"{p.host}: the plan's playbook {s.playbook!r} is not a strategy's"
                )
            check_vars(s.playbook, s.vars, f"{p.host}: steps/{i}/vars", plan_step=True)
        if p.extra.get("complete") is False and p.steps:
            # a step parameter the facts did not give (interface, driver version, Python):
            # the plan says what to gather; apply does not guess it
            ids = [str(n.get("id")) for n in p.extra.get("needs") or [] if isinstance(n, dict)]
            raise InvalidInput(
                f"{p.host}: the plan is incomplete (needs: {', '.join(ids) or 'facts'}): "
                "gather them (see `gpufix plan` for how) and plan again"
            )
        interim = p.interim.steps if p.interim else []
        aimed = [s for s in [*p.steps, *interim] if s.target != "host"]
        if aimed:
            # facts gathered inside a container: the change belongs on the machine that runs it,
            # which is not the inventory host the plan names
            raise InvalidInput(
                f"{p.host}: the plan's step {aimed[0].description!r} is for the container's host "
                f"({aimed[0].target}), and {p.host} is the container: gather facts on the host "
                "that runs the container and plan there"
            )


class Applier:
    """One apply run over a list of plans (one per host)."""

    def __init__(
        self,
        plans: list[Plan],
        opts: Options,
        report: runner.Progress | None = None,
        *,
        fresh_facts: bool,
    ) -> None:
        self.fresh_facts = fresh_facts  # plans were made from facts gathered just now
        self.opts = opts
        self.report = report or (lambda host, msg: None)
        self.order = [p.host for p in plans]
        self.source = {p.host: p for p in plans}
        self.plans = {p.host: work_plan(p, opts.interim) for p in plans}
        self.kind = "interim" if opts.interim else "permanent"
        self.t0: dict[str, float] = {}

    def run(self, plan_file: str | None) -> Result:
        work = [self.plans[h] for h in self.order]
        validate(work, self.opts.inventory)
        if self.opts.verify:
            # the probe runs after the change: its options are checked before anything runs
            check_vars("probe.yml", self.opts.probe_vars, "the probe options (--probe-*)")
        pd = plans_digest([self.source[h] for h in self.order], self.kind)
        if self.opts.check:
            # a dry run too: its diffs mean nothing while another run changes the host
            with HostLocks(self.order) as locks:
                fresh = {h: ("step", 0) for h in self.order}
                peek = HostLock(self.opts.inventory, forks=self.opts.forks, report=self.report)
                with _before_any_change():
                    others, lost, held = peek.peek(self.order)
                for h, line in others.items():
                    held[h] = (
                        f"another gpufix run holds this host: {line}; its diffs would mean nothing now"
                    )
                live = _unlocked_skipped(fresh, held, lost)
                unreachable = self._fresh(live, None, new_run=True)
                unreachable.update(lost)
                dry = self._start(pd, plan_file, {})
                locks.label(dry.run_id)
                return self._execute(dry, fresh, unreachable, False, held)
        with HostLocks(self.order) as locks:
            old, actions, mode = self._decide(pd)
            if mode == "noop":
                assert old is not None
                return _result(self, old, resumed=True, stopped=False, noop=True)
            # the lock on the hosts themselves: another controller's run may be changing one
            lock = HostLock(
                self.opts.inventory,
                forks=self.opts.forks,
                force=hostlock.FORCE in self.opts.force,
                report=self.report,
            )
            try:
                busy = [h for h, (act, _) in actions.items() if _changes(act, self.plans[h])]
                with _before_any_change():
                    held, lost = lock.take(
                        busy, _rebooting(old, busy, mode), self.opts.reboot_timeout
                    )
                live = _unlocked_skipped(actions, held, lost)
                # facts again before anything is written: a stale plan leaves no run behind
                unreachable = self._fresh(live, old if mode == "resume" else None, mode != "resume")
                unreachable.update(lost)
                if mode == "resume":
                    assert old is not None
                    self.report("*", f"resuming run {old.run_id} ({old.state})")
                    old.claim()
                    journal: Journal = old
                else:
                    extra = {"retry_of": old.run_id} if (mode == "retry" and old) else {}
                    journal = self._start(pd, plan_file, extra)
                    for h, (act, _) in actions.items():
                        if mode == "retry" and act == "skip" and old is not None:
                            journal.set_state(h, "skipped", f"done in run {old.run_id}")
                locks.label(journal.run_id)
                return self._execute(journal, actions, unreachable, mode == "resume", held)
            finally:
                lock.release()

    def _decide(self, pd: str) -> tuple[FileJournal | None, dict[str, tuple[str, int]], str]:
        """What to do per host, and how: "new" run, "resume" the newest run of this plan,
        "retry" in a new run the hosts it rolled back, or "noop" (already applied). Reads only."""
        old = FileJournal.find_for_plan(pd)
        if old is None:
            return None, {h: ("step", 0) for h in self.order}, "new"
        if old.state == "running":
            raise GpufixError(
                f"run {old.run_id} of this plan is still running (pid {old.meta.get('pid')})"
            )
        actions = {h: next_action(old.host(h)) for h in self.order}
        refused = [h for h, (a, _) in actions.items() if a == "refuse"]
        if refused:
            raise GpufixError(
                f"run {old.run_id} of this plan cannot resume: "
                + "; ".join(
                    f"{h} is {old.host(h)['state']} ({old.host(h).get('reason')})" for h in refused
                )
                + f": `gpufix rollback {old.run_id} HOST -i {self.opts.inventory}` or re-plan"
            )
        for h in self.order:
            if old.host(h)["state"] == "reboot-pending" and self.opts.allow_reboot:
                # a role that reboots itself does it when its steps run again
                actions[h] = ("step", 0) if role_reboots(self.plans[h]) else ("reboot", -1)
        kinds = {a for a, _ in actions.values()}
        if kinds <= {"skip"}:
            self.report("*", f"plan already applied in run {old.run_id}: nothing to do")
            return old, actions, "noop"
        if kinds <= {"skip", "retry"}:
            self.report("*", f"retrying the hosts run {old.run_id} rolled back, in a new run")
            return (
                old,
                {h: ("skip", -1) if a == "skip" else ("step", 0) for h, (a, _) in actions.items()},
                "retry",
            )
        # a resume goes on from where the journal says, and a failure then rolls back from its
        # records: only a journal this controller wrote (a no-op or a retry in a new run acts
        # on nothing it says)
        old.require_sealed("resumed")
        touched = {h: old.host(h) for h in self.order if step_ran(old.host(h))}
        targets.check_same(
            touched,
            old.meta.get("options", {}).get("inventory"),
            self.opts.inventory,
            f"resuming run {old.run_id}",
        )
        # a rolled-back host waits for the next run; the others go on where they stopped
        return (
            old,
            {h: ("skip", -1) if a == "retry" else (a, i) for h, (a, i) in actions.items()},
            "resume",
        )

    def _fresh(
        self, actions: dict[str, tuple[str, int]], old: Journal | None, new_run: bool
    ) -> dict[str, str]:
        """The stale-plan check for every host not yet changed (InvalidInput when one is
        stale); {host: why} for hosts that could not be reached."""
        if new_run and self.fresh_facts:
            return {}  # apply --strategy: the plans were made from facts gathered just now
        untouched = [
            h
            for h in self.order
            if actions[h][0] == "step" and (old is None or not step_ran(old.host(h)))
        ]
        with _before_any_change():
            return freshness.check_fresh(
                [self.source[h] for h in untouched],
                self.opts.inventory,
                self.report,
                forks=self.opts.forks,
                timeout=self.opts.facts_timeout,
            )

    def _start(self, pd: str, plan_file: str | None, extra: dict[str, Any]) -> Journal:
        cls = Journal if self.opts.check else FileJournal
        journal = cls.start(
            [
                {"host": h, "strategy": self.plans[h].strategy, "steps": _steps(self.plans[h])}
                for h in self.order
            ],
            plan_digest=pd,
            options=self.opts.public(),
            plan_file=plan_file,
            extra={"kind": self.kind, **extra},
        )
        if not self.opts.check:  # the machine each name is, for a resume or a rollback
            for h, target in targets.addresses(self.order, self.opts.inventory).items():
                journal.update(h, target=target)
        return journal

    def _execute(
        self,
        journal: Journal,
        actions: dict[str, tuple[str, int]],
        unreachable: dict[str, str],
        resumed: bool,
        held: dict[str, str],
    ) -> Result:
        try:
            stopped = self._rollout(journal, actions, unreachable, held)
        except KeyboardInterrupt:
            journal.finish("interrupted")
            where = (
                f"run {journal.run_id} records where each host stands (`gpufix status`); "
                "apply the same plan again to resume"
                if journal.persistent
                else "check mode: nothing was changed"
            )
            # the CLI prints the message and exits 130
            raise KeyboardInterrupt(f"interrupted: {where}") from None
        except Exception as exc:
            # recorded as what it was, not left "running" to be read later as interrupted
            journal.finish(
                "failed",
                {h: journal.host(h)["state"] for h in self.order},
                error=f"{type(exc).__name__}: {exc}",
            )
            raise
        journal.finish(
            "stopped" if stopped else "complete", {h: journal.host(h)["state"] for h in self.order}
        )
        return _result(self, journal, resumed=resumed, stopped=stopped)

    def _rollout(
        self,
        journal: Journal,
        actions: dict[str, tuple[str, int]],
        unreachable: dict[str, str],
        held: dict[str, str],
    ) -> bool:
        """The batches, canary first. True: --max-fail stopped the rollout."""
        phases = Phases(journal, self.plans, self.opts, self.report, self.t0)
        failures = 0
        work: list[str] = []
        for h in self.order:
            act, _ = actions[h]
            if h in unreachable:
                phases.set(h, "unreachable", unreachable[h])
                failures += 1
            elif h in held:
                # a host part-way (rebooting, verifying) keeps its state, so the next apply
                # picks it up where it stopped; `blocked` would start its steps over
                phases.set(h, "blocked" if act == "step" else phases.state(h), held[h])
                failures += 1
            elif act in ("skip", "retry"):
                continue
            elif act == "step" and not self.plans[h].changes:
                phases.set(h, "skipped", "nothing to do")
            else:
                work.append(h)
        groups = batches(work, self.opts.batch, canary=self.opts.canary)
        for n, group in enumerate(groups):
            if failures > self.opts.max_fail:
                for h in (h for g in groups[n:] for h in g):
                    phases.set(
                        h,
                        "skipped",
                        f"left untouched: the rollout stopped after {failures} failure(s) "
                        f"(--max-fail {self.opts.max_fail})",
                    )
                return True
            self.report("*", f"batch {n + 1}/{len(groups)}: {', '.join(group)}")
            failures += phases.batch(group, actions)
        return False


def _result(
    self: Applier, journal: Journal, *, resumed: bool, stopped: bool, noop: bool = False
) -> Result:
    """The run's outcome per host, from its journal."""
    t0 = self.t0
    outcomes = []
    for h in self.order:
        rec = journal.host(h)
        verdicts = [v for v in rec.get("verdicts") or [] if v.get("phase") != "rolled-back"]
        verdict = rec.get("failed_verdict") if rec["state"] == "rolled-back" else None
        if verdict is None and verdicts:
            verdict = verdicts[-1].get("verdict")
        start = t0.get(h)
        outcomes.append(
            Outcome(
                host=h,
                strategy=str(rec["strategy"]),
                state=str(rec["state"]),
                changed=journal.changed(h),
                rebooted=bool(rec.get("rebooted")),
                verdict=verdict,
                elapsed_s=(time.monotonic() - start) if start else 0.0,
                message=str(rec.get("reason") or ""),
                diffs=tuple(rec.get("diffs") or ()),
            )
        )
    return Result(
        run_id=journal.run_id if journal.persistent else None,
        outcomes=tuple(outcomes),
        stopped=stopped,
        resumed=resumed,
        check=self.opts.check,
        noop=noop,
        retry_of=journal.meta.get("retry_of"),
    )


@contextmanager
def _before_any_change() -> Iterator[None]:
    """A Ctrl-C in here came before any host was changed: the message says so."""
    try:
        yield
    except KeyboardInterrupt:
        raise KeyboardInterrupt("interrupted before any host was changed") from None


def _changes(act: str, plan: Plan) -> bool:
    """Whether the run may change the host: it is locked (on the host) first."""
    return act not in ("skip", "retry") and (act != "step" or plan.changes)


def _rebooting(old: Journal | None, hosts: list[str], mode: str) -> list[str]:
    """A resumed run's hosts whose reboot the last run did not see end (a Ctrl-C while they
    were down): the host lock waits --reboot-timeout for them, as the reboot would have."""
    if mode != "resume" or old is None:
        return []
    return [h for h in hosts if old.host(h).get("state") == "rebooting"]


def _unlocked_skipped(
    actions: dict[str, tuple[str, int]], held: dict[str, str], lost: dict[str, str]
) -> dict[str, tuple[str, int]]:
    """The actions with the hosts the lock did not get passed over (their facts are not read)."""
    return {h: ("skip", -1) if h in held or h in lost else a for h, a in actions.items()}


def _steps(plan: Plan) -> list[dict[str, Any]]:
    return [
        {"playbook": s.playbook, "description": s.description, "vars": s.vars, "reboot": s.reboot}
        for s in plan.steps
    ]


def apply(
    plans: list[Plan],
    opts: Options,
    *,
    plan_file: str | None = None,
    report: runner.Progress | None = None,
    fresh_facts: bool = False,
) -> Result:
    """Apply plans (one per host). Raises GpufixError for refusals (edited or stale plan, busy
    host, run that cannot resume) and KeyboardInterrupt (exit 130) on Ctrl-C / SIGTERM.

    plan_file: the plans come from a file: re-derived and refused unless identical
    (gpufix.apply.request). fresh_facts: the plans were made from facts gathered just now
    (apply --strategy), so a new run does not gather them again.
    """
    if plan_file is not None:
        from gpufix.engine.kb import load as load_kb
        from gpufix.engine.rules import load as load_rules

        request.check_plans(plans, load_kb(), load_rules(), "plan file")
    return Applier(plans, opts, report, fresh_facts=fresh_facts).run(plan_file)
