"""After a host's steps: the reboot (when the change needs one and it is allowed), the probe in
the training environment, and a failure's rollback. The base of gpufix.apply.phases.Phases,
which holds the run's journal, plans and options."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpufix import inputs, runner
from gpufix.apply import interims
from gpufix.apply.journal import Journal
from gpufix.apply.result import HEALTHY, Options
from gpufix.apply.rollback import KERNEL_PLAYBOOK, read_after, rollback
from gpufix.engine.plan import Plan
from gpufix.errors import GpufixError

FINALIZE_PLAYBOOK = "kernel_finalize.yml"
UNVERIFIED_KERNEL = (
    "not verified (--no-verify): the new kernel was booted once, and GRUB's default is still "
    "the previous one, so the next reboot returns to it; `gpufix apply` of the same plan "
    "without --no-verify probes it and makes it the default"
)


def kernel_step(plan: Plan) -> bool:
    return plan.strategy == "kernel-upgrade" or any(
        s.playbook == KERNEL_PLAYBOOK for s in plan.steps
    )


def kernel_target(plan: Plan) -> str | None:
    for s in plan.steps:
        if s.playbook == KERNEL_PLAYBOOK and s.vars.get("gpufix_kernel_target"):
            return str(s.vars["gpufix_kernel_target"])
    return None


def needs_reboot(plan: Plan) -> bool:
    return plan.reboot_required or any(s.reboot for s in plan.steps)


def role_reboots(plan: Plan) -> bool:
    """Roles that take a *_reboot_allowed variable reboot themselves (the kernel role boots
    the new kernel once, checks it and only then makes it the default)."""
    return any(k.endswith("_reboot_allowed") for s in plan.steps for k in s.vars)


def verdict_summary(verdict: Any, hr: runner.HostResult | None) -> dict[str, Any]:
    if not isinstance(verdict, dict) or not verdict:
        return {"verdict": None, "error": hr.message if hr else "no result"}
    # job_env: the job's settings the verification ran with (--probe-job-env); job_env_culprit:
    # the one of them that alone broke it
    keep = (
        "verdict",
        "backend",
        "world_size",
        "stalled",
        "error",
        "causes",
        "deadline_s",
        "job_env",
        "job_env_culprit",
    )
    return {k: verdict.get(k) for k in keep if k in verdict}


@dataclass
class After:
    journal: Journal
    plans: dict[str, Plan]
    opts: Options
    report: runner.Progress
    t0: dict[str, float] = field(default_factory=dict)

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
            forks=self.opts.forks,
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
        todo: dict[tuple[str, str], list[str]] = {}  # (interpreter, NCCL defaults) -> hosts
        for h in hosts:
            if self.state(h) in ("reboot-pending", "failed", "unreachable"):
                continue
            if not self.opts.verify:
                self._unverified(h)
                continue
            self.set(h, "verifying")
            py = self.opts.probe_vars.get("gpufix_probe_python") or self.plans[h].verify.get(
                "python"
            )
            # an interim's "off" still in /etc/nccl.conf: the probe runs without it (plan.verify)
            defaults = "" if self.opts.interim else self.plans[h].verify.get("nccl_defaults", "")
            todo.setdefault((py or "", defaults), []).append(h)
        for (py, defaults), group in todo.items():
            extra: dict[str, Any] = {"gpufix_probe_python": py} if py else {}
            if defaults:
                extra["gpufix_probe_nccl_defaults"] = defaults.split(",")
            res = runner.run_playbook(
                "probe.yml",
                self.opts.inventory,
                limit=",".join(group),
                extravars={**self.opts.probe_vars, **extra},
                timeout=self.opts.reboot_timeout + 600,
                forks=self.opts.forks,
                progress=self.report,
            )
            for h in group:
                self._verdict(h, res.hosts.get(h))

    def _unverified(self, h: str) -> None:
        """--no-verify. A new kernel booted once (GRUB's one-shot entry) is not GRUB's default
        until a probe passed on it: say so, and leave the host for the next apply to verify."""
        rec = self.journal.host(h)
        if kernel_step(self.plans[h]) and rec.get("rebooted") and not self.opts.check:
            self.journal.update(h, finalize_pending=True)
            self.set(h, "applied", UNVERIFIED_KERNEL)
            return
        self.set(h, "applied", "")

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
            if kernel_step(self.plans[h]) and self.journal.changed_any(h) and not self.opts.check:
                self.finalize(h)
                return
            self.set(h, "healthy", "probe: healthy" + self._interims(h))
            return
        stalled = verdict.get("stalled") if isinstance(verdict, dict) else None
        why = (
            (verdict.get("error") if isinstance(verdict, dict) else None)
            or (f"stalled in {stalled.get('phase')}" if isinstance(stalled, dict) else None)
            or (hr.message if hr else "no result")
        )
        self.fail(h, f"probe verdict {v or 'none'}: {why}", verdict=v or "none")

    def finalize(self, h: str) -> None:
        """The new kernel passed the probe: give GRUB back the host's own order, so the next
        reboot (and later security kernels) do not fall back to the previous kernel."""
        target = kernel_target(self.plans[h])
        res = runner.run_playbook(
            FINALIZE_PLAYBOOK,
            self.opts.inventory,
            limit=h,
            extravars={"gpufix_kernel_target": target} if target else {},
            timeout=self.opts.step_timeout,  # one playbook run, like a step (--playbook-timeout)
            progress=self.report,
        )
        hr = res.hosts.get(h)
        if hr is not None and hr.status == "ok":
            self.journal.update(h, finalize_pending=False)
            note = "probe: healthy; the new kernel is GRUB's default now" + self._interims(h)
            self.set(h, "healthy", note)
            return
        msg = hr.message if hr else f"no result ({res.status})"
        # healthy but not the default yet: the next reboot would return to the old kernel
        self.set(
            h,
            "healthy",
            f"probe: healthy, but GRUB's default order was not restored ({inputs.one_line(msg)}):"
            f" run playbooks/{FINALIZE_PLAYBOOK} on {h} before the next reboot",
        )

    def _interims(self, h: str) -> str:
        """Interim runs whose setting the permanent fix was just verified without."""
        defaults = "" if self.opts.interim else self.plans[h].verify.get("nccl_defaults", "")
        if not defaults or not self.journal.persistent:
            return ""
        return interims.note(h, self.journal.run_id, defaults)

    # -- failure and rollback -----------------------------------------------------------------
    def fail(self, h: str, reason: str, verdict: str | None) -> None:
        self.set(h, "failed", reason)
        if verdict is not None:
            self.journal.update(h, failed_verdict=verdict)
        if (
            not self.opts.check
            and self.journal.persistent
            and not self.journal.host(h).get("after")
        ):
            # A step failed before the host was read back: read it now, not at a rollback days
            # later, which would take what others changed since for this run's doing.
            try:
                read_after(self.journal, h, self.opts.inventory, self.report)
            except GpufixError as exc:
                self.report(h, f"warning: the host as the failed step left it: {exc}")
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
