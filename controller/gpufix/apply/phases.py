"""One batch of an apply run, phase by phase: host check, steps, the state after them, then
(gpufix.apply.after) reboot, probe, and rollback of a failure. Every transition goes through
the run's journal first (a FileJournal, or the in-memory Journal in check mode)."""

from __future__ import annotations

import json
import time
from typing import Any

from gpufix import runner, strategies
from gpufix.apply import hostcheck
from gpufix.apply.after import After, kernel_step, needs_reboot, role_reboots
from gpufix.apply.journal import FINAL_OK, step_ran
from gpufix.engine.plan import Step

__all__ = ["Phases", "kernel_step", "needs_reboot", "role_reboots", "step_vars"]


def step_vars(
    step: Step, *, allow_reboot: bool, check: bool, reboot_timeout: int | None = None
) -> dict[str, Any]:
    """The plan's variables, with every *_reboot_allowed gated by --allow-reboot; a role that
    reboots by itself waits --reboot-timeout for the host, as playbooks/reboot.yml does."""
    out = dict(step.vars)
    for k, v in step.vars.items():
        if k.endswith("_reboot_allowed"):
            out[k] = bool(v) and allow_reboot and not check
            if reboot_timeout is not None:
                out[k.removesuffix("_allowed") + "_timeout"] = reboot_timeout
    return out


def _lost_in_reboot(hr: runner.HostResult) -> bool:
    """ansible.builtin.reboot gave up waiting: the host went down and did not come back."""
    return "Timed out waiting for" in hr.message and any(
        "reboot" in str(r.get("task", "")).lower() for r in hr.results if r.get("failed")
    )


class Phases(After):
    """One batch: host check, steps, the state after them; then After's reboot and probe."""

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
            if act == "reboot":
                ok = self.idle(ok)
            if act in ("step", "reboot"):
                ok = self.reboot(ok)
            if act == "verify":
                for h in ok:
                    if self.state(h) == "unreachable":
                        # it did not come back from its reboot in time in an earlier run; it may
                        # have since: the probe finds out (an unreachable host stays so)
                        self.set(h, "verifying", "resumed: probing a host lost after its reboot")
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
                "probe_python": self.opts.probe_vars.get("gpufix_probe_python")
                or self.plans[h].verify.get("python")
                or "",
            }
            for h in hosts
        }
        res = hostcheck.run_preflight(
            want,
            self.opts.inventory,
            force=self.opts.force,
            dpkg_wait=self.opts.dpkg_wait,
            progress=self.report,
            forks=self.opts.forks,
            probe_vars=self.opts.probe_vars if self.opts.verify else None,
        )
        ok = []
        for h in hosts:
            pf = res[h]
            for w in pf.warnings:
                self.report(h, "warning: " + w)
            if pf.unreachable:
                self.set(h, "unreachable", pf.summary())
            elif not pf.ok:
                self.set(h, "blocked", "preflight: " + pf.summary() + self._part_way(h))
            else:
                if not self.journal.host(h).get("before"):
                    self.journal.update(h, before=pf.report)
                ok.append(h)
        return ok

    def _part_way(self, h: str) -> str:
        """For a host a resumed run blocked: `blocked` reads as "nothing changed", and a person
        who re-plans starts a new run whose `before` is the half-made change."""
        steps = self.journal.host(h)["steps"]
        done = sum(1 for s in steps if s.get("state") == "done")
        if not step_ran(self.journal.host(h)) or not self.journal.persistent:
            return ""
        return (
            f"; part-way through the change ({done} of {len(steps)} steps done in run "
            f"{self.journal.run_id}): apply the same plan again once this is cleared, or "
            f"`gpufix rollback {self.journal.run_id} {h} -i INVENTORY`"
        )

    def idle(self, hosts: list[str]) -> list[str]:
        """A resumed reboot (its steps ran in an earlier run, maybe days ago) is checked for GPU
        work first, as a rollback's reboot is: the host may run jobs again by now. A host that
        runs some, runs another package job, or cannot be read stays reboot-pending (or
        unreachable) for the next apply."""
        if not hosts:
            return []
        res = hostcheck.before_reboot(
            hosts,
            self.opts.inventory,
            force=self.opts.force,
            progress=self.report,
            forks=self.opts.forks,
        )
        ok = []
        for h in hosts:
            got = res[h]
            for w in got.warnings:
                self.report(h, "warning: " + w)
            hold = hostcheck.reboot_hold(got)
            if hold is not None:
                state = "unreachable" if got.unreachable else "reboot-pending"
                self.set(h, state, "not rebooted: " + hold.message)
                continue
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
                    step,
                    allow_reboot=self.opts.allow_reboot,
                    check=self.opts.check,
                    reboot_timeout=self.opts.reboot_timeout,
                ),
                check=self.opts.check,
                timeout=self.opts.step_timeout,
                forks=self.opts.forks,
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
        files = [p for r in hr.results for p in r.get("paths") or ()]
        good = hr.status == "ok"
        self.journal.step_finished(
            h, i, ok=good, changed=hr.changed, files=files, message=hr.message
        )
        if hr.diffs and self.opts.check:
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
            forks=self.opts.forks,
        )
        for h in hosts:
            if not res[h].unreachable:
                self.journal.update(h, after=res[h].report)
        return hosts
