"""One batch of an apply run, phase by phase: host check, steps, the state after them, reboot,
probe; a failure rolls the host back when asked. Every transition goes through the run's
journal first (a FileJournal, or the in-memory Journal in check mode)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpufix import inputs, runner, strategies
from gpufix.apply import hostcheck
from gpufix.apply.journal import FINAL_OK, Journal
from gpufix.apply.result import HEALTHY, Options
from gpufix.apply.rollback import rollback
from gpufix.engine.plan import Plan, Step
from gpufix.errors import GpufixError

Report = Callable[[str, str], None]
KERNEL_PLAYBOOK = "kernel_upgrade.yml"


def kernel_step(plan: Plan) -> bool:
    return plan.strategy == "kernel-upgrade" or any(
        s.playbook == KERNEL_PLAYBOOK for s in plan.steps
    )


def needs_reboot(plan: Plan) -> bool:
    return plan.reboot_required or any(s.reboot for s in plan.steps)


def role_reboots(plan: Plan) -> bool:
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


def _lost_in_reboot(hr: runner.HostResult) -> bool:
    """ansible.builtin.reboot gave up waiting: the host went down and did not come back."""
    return "Timed out waiting for" in hr.message and any(
        "reboot" in str(r.get("task", "")).lower() for r in hr.results if r.get("failed")
    )


def verdict_summary(verdict: Any, hr: runner.HostResult | None) -> dict[str, Any]:
    if not isinstance(verdict, dict) or not verdict:
        return {"verdict": None, "error": hr.message if hr else "no result"}
    keep = ("verdict", "backend", "world_size", "stalled", "error", "causes", "deadline_s")
    return {k: verdict.get(k) for k in keep if k in verdict}


@dataclass
class Phases:
    journal: Journal
    plans: dict[str, Plan]
    opts: Options
    report: Report
    t0: dict[str, float] = field(default_factory=dict)

    # -- the batch --------------------------------------------------------------------------
    def batch(self, hosts: list[str], actions: dict[str, tuple[str, int]]) -> int:
        """Run one batch; the number of hosts that did not end well."""
        for h in hosts:
            self.t0[h] = time.monotonic()
        stepping = [h for h in hosts if actions[h][0] == "step"]
        alive = self.preflight(stepping) + [h for h in hosts if actions[h][0] != "step"]
        # hosts with the same steps from the same point run together (one ansible run per step)
        keyed: dict[str, list[str]] = {}
        for h in alive:
            act, start = actions[h]
            steps = self.plans[h].steps[start:] if act == "step" else []
            key = json.dumps([act, [[s.playbook, s.vars] for s in steps]], sort_keys=True)
            keyed.setdefault(key, []).append(h)
        for group in keyed.values():
            act, start = actions[group[0]]
            ok = group
            if act == "step":
                ok = self.after_steps(self.steps(group, start))
            if self.opts.check:
                continue
            if act in ("step", "reboot"):
                ok = self.reboot(ok)
            self.verify(ok)
        done = (*FINAL_OK, "skipped", "would-change", "no-change")
        return sum(1 for h in hosts if self.state(h) not in done)

    def preflight(self, hosts: list[str]) -> list[str]:
        if not hosts:
            return []
        for h in hosts:
            self.set(h, "preflight")
        want = {
            h: {
                "strategy": self.plans[h].strategy,
                "kernel_step": kernel_step(self.plans[h]),
                "files": list(strategies.get(self.plans[h].strategy).watched_files),
            }
            for h in hosts
        }
        res = hostcheck.run_preflight(
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
                self.set(h, "unreachable", pf.summary())
            elif not pf.ok:
                self.set(h, "blocked", "preflight: " + pf.summary())
            else:
                if not self.journal.host(h).get("before"):
                    self.journal.update(h, before=pf.report)
                ok.append(h)
        return ok

    def steps(self, hosts: list[str], start: int) -> list[str]:
        ok = list(hosts)
        steps = self.plans[hosts[0]].steps
        for i in range(start, len(steps)):
            if not ok:
                break
            step = steps[i]
            for h in ok:
                self.journal.step_started(h, i)
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
            ok = [h for h in ok if self._step_result(h, i, step, res)]
        if self.opts.check:
            for h in ok:
                state = "would-change" if self.journal.changed(h) else "no-change"
                self.set(h, state, "check mode: nothing was changed")
        return ok

    def _step_result(self, h: str, i: int, step: Step, res: runner.RunResult) -> bool:
        hr = res.hosts.get(h) or runner.HostResult(
            host=h, status="failed", message=f"no result ({res.status})"
        )
        files = [r["path"] for r in hr.results if r.get("path")]
        good = hr.status == "ok"
        self.journal.step_finished(
            h, i, ok=good, changed=hr.changed, files=files, message=hr.message
        )
        if hr.diffs:
            rec = self.journal.host(h)
            self.journal.update(h, diffs=[*rec.get("diffs", []), *hr.diffs])
        if any(r.get("rebooted") for r in hr.results):
            self.journal.update(h, rebooted=True)
        if hr.status == "unreachable":
            self.set(h, "unreachable", f"lost during {step.playbook}: {hr.message}")
        elif not good and _lost_in_reboot(hr):
            # a role's own reboot that did not come back: nothing can be rolled back
            self.journal.update(h, rebooted=True)
            self.set(
                h,
                "unreachable",
                f"did not come back from the reboot in {step.playbook}: {hr.message}",
            )
        elif not good:
            self.fail(h, f"{step.playbook} failed: {hr.message}", verdict=None)
        return good

    def after_steps(self, hosts: list[str]) -> list[str]:
        """Record what the host looks like after the steps (for the journal and rollback)."""
        if self.opts.check or not hosts:
            return hosts
        res = hostcheck.run_preflight(
            {h: {"strategy": self.plans[h].strategy} for h in hosts},
            self.opts.inventory,
            dpkg_wait=0,
            force=hostcheck.FORCEABLE,
        )
        for h in hosts:
            if not res[h].unreachable:
                self.journal.update(h, after=res[h].report)
        return hosts

    def reboot(self, hosts: list[str]) -> list[str]:
        need = [
            h
            for h in hosts
            if needs_reboot(self.plans[h])
            and self.journal.changed_any(h)
            # the role rebooted (or found nothing to reboot for) by itself
            and not (role_reboots(self.plans[h]) and self.opts.allow_reboot)
        ]
        if not self.opts.allow_reboot:
            for h in need:
                self.set(
                    h, "reboot-pending", "the change needs a reboot: re-run with --allow-reboot"
                )
            return [h for h in hosts if h not in need]
        if not need:
            return hosts
        for h in need:
            self.journal.update(h, changed_any=True)
            self.set(h, "rebooting")
        res = runner.run_playbook(
            "reboot.yml",
            self.opts.inventory,
            limit=",".join(need),
            extravars={"gpufix_reboot_timeout": self.opts.reboot_timeout},
            timeout=self.opts.reboot_timeout + 300,
            progress=self.report,
        )
        back = [h for h in hosts if h not in need]
        for h in need:
            hr = res.hosts.get(h)
            if hr is not None and hr.status == "ok":
                self.journal.update(h, rebooted=True)
                back.append(h)
                continue
            msg = hr.message if hr else f"no result ({res.status})"
            if hr is not None and "not rebooting" in msg:
                # the playbook refused before rebooting (no NVIDIA module for the new kernel)
                self.fail(h, msg, verdict=None)
            elif hr is None or hr.status == "unreachable" or "Timed out" in msg:
                self.journal.update(h, rebooted=True)
                self.set(
                    h,
                    "unreachable",
                    f"did not come back within {self.opts.reboot_timeout} s of the reboot: {msg}",
                )
            else:
                self.fail(h, f"reboot failed: {msg}", verdict=None)
        return back

    def verify(self, hosts: list[str]) -> None:
        todo: dict[str, list[str]] = {}  # interpreter -> hosts
        for h in hosts:
            if self.state(h) in ("reboot-pending", "failed", "unreachable"):
                continue
            if not self.opts.verify:
                self.set(h, "applied", "")
                continue
            self.set(h, "verifying")
            py = self.opts.probe_vars.get("gpufix_probe_python") or self.plans[h].verify.get(
                "python"
            )
            todo.setdefault(py or "", []).append(h)
        for py, group in todo.items():
            extra = {"gpufix_probe_python": py} if py else {}
            res = runner.run_playbook(
                "probe.yml",
                self.opts.inventory,
                limit=",".join(group),
                extravars={**self.opts.probe_vars, **extra},
                timeout=self.opts.reboot_timeout + 600,
                progress=self.report,
            )
            for h in group:
                self._verdict(h, res.hosts.get(h))

    def _verdict(self, h: str, hr: runner.HostResult | None) -> None:
        if hr is not None and hr.status == "unreachable":
            self.set(h, "unreachable", f"lost before the probe: {hr.message}")
            return
        verdict = (hr.data.get("gpufix_probe_verdict") if hr else None) or {}
        if verdict:
            try:  # what the host reports is data: checked like a verdict file
                inputs.check_tree(verdict, f"probe verdict from {h}")
                inputs.check_probe_verdict(verdict, f"probe verdict from {h}")
            except GpufixError as exc:
                verdict = {"verdict": "failed", "error": f"unusable verdict: {exc}"}
        v = verdict.get("verdict") if isinstance(verdict, dict) else None
        self.journal.add_verdict(h, "after-apply", verdict_summary(verdict, hr))
        if v in HEALTHY:
            self.set(h, "healthy", "probe: healthy")
            return
        stalled = verdict.get("stalled") if isinstance(verdict, dict) else None
        why = (
            (verdict.get("error") if isinstance(verdict, dict) else None)
            or (f"stalled in {stalled.get('phase')}" if isinstance(stalled, dict) else None)
            or (hr.message if hr else "no result")
        )
        self.fail(h, f"probe verdict {v or 'none'}: {why}", verdict=v or "none")

    # -- failure and rollback -----------------------------------------------------------------
    def fail(self, h: str, reason: str, verdict: str | None) -> None:
        self.set(h, "failed", reason)
        if verdict is not None:
            self.journal.update(h, failed_verdict=verdict)
        on = self.opts.rollback_on_failure
        if on is None:
            on = kernel_step(self.plans[h])
        if on and not self.opts.check and self.journal.persistent:
            self.report(h, "rolling back")
            try:
                rollback(
                    self.journal,
                    h,
                    self.opts.inventory,
                    allow_reboot=self.opts.allow_reboot,
                    force=self.opts.force,
                    report=self.report,
                    reboot_timeout=self.opts.reboot_timeout,
                )
            except GpufixError as exc:
                self.set(h, "failed", f"{reason}; not rolled back: {exc}")

    # -- journal helpers ------------------------------------------------------------------
    def set(self, h: str, state: str, reason: str = "") -> None:
        if reason:
            self.report(h, f"{state}: {reason}")
        self.journal.set_state(h, state, reason)

    def state(self, h: str) -> str:
        return str(self.journal.host(h)["state"])
