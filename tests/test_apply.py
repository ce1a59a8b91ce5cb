"""apply without containers: batches, exit codes, stale plans, preflight decisions, rollback
vars, validation, reboot gating."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from gpufix.apply import batches, freshness, phases, result, rolevars, rollback, rollout
from gpufix.apply import hostcheck as safety
from gpufix.engine.decide import stable_facts
from gpufix.engine.plan import Plan, Step, digest
from gpufix.errors import InvalidInput


def test_batches_start_with_a_canary() -> None:
    hosts = [f"h{i}" for i in range(10)]
    assert batches.batches(hosts, "3") == [
        ["h0"],
        ["h1", "h2", "h3"],
        ["h4", "h5", "h6"],
        ["h7", "h8", "h9"],
    ]
    assert batches.batches(hosts, "50%") == [["h0"], hosts[1:6], hosts[6:]]
    assert batches.batches(hosts, "100%", canary=False) == [hosts]
    assert batches.batches(["a"], "25%") == [["a"]]
    assert batches.batches([], "1") == []
    # never all at once by default: 25% of 4 is 1 host per batch
    assert all(
        len(b) == 1 for b in batches.batches(["a", "b", "c", "d"], result.Options(Path()).batch)
    )


@pytest.mark.parametrize("bad", ["0", "-1", "x", "0%", "150%", ""])
def test_bad_batch_is_a_one_line_error(bad: str) -> None:
    with pytest.raises(InvalidInput, match="bad --batch"):
        batches.parse_batch(bad, 4)


def _o(state: str, verdict: str | None = None) -> result.Outcome:
    return result.Outcome("h", "s", state, 0, False, verdict, 0.0, "")


@pytest.mark.parametrize(
    ("states", "code"),
    [
        ([_o("skipped")], 0),
        ([_o("healthy", "healthy"), _o("skipped")], 2),
        ([_o("reboot-pending")], 2),
        ([_o("healthy", "healthy"), _o("rolled-back", "hung")], 5),
        ([_o("failed", "failed"), _o("unreachable")], 5),
        ([_o("healthy", "healthy"), _o("unreachable")], 4),
        ([_o("blocked"), _o("healthy", "healthy")], 1),
        ([_o("failed")], 1),
    ],
)
def test_exit_codes(states: list[result.Outcome], code: int) -> None:
    assert result.exit_code(states) == code


def _plan(base: dict, kb: str = "sha256:kb", **extra: object) -> Plan:
    return Plan(
        host="h1",
        strategy="nccl-profile",
        findings=[],
        options=[],
        steps=[Step("nccl_profile.yml", "nccl", {"gpufix_nccl_profile_names": ["default"]})],
        reboot_required=False,
        outcome="",
        risks=[],
        path=[],
        facts_digest=digest(stable_facts(base)),
        kb_digest=kb,
        extra=dict(extra),
    )


FACTS = {"kernel": {"running": "4.15.0-213-generic"}, "gpu_processes": [], "kernel_log": {}}


def test_volatile_facts_do_not_make_a_plan_stale() -> None:
    now = {**FACTS, "gpu_processes": [{"pid": 1}], "kernel_log": {"xid": 3}}
    assert freshness.stale_reason(_plan(FACTS), now, "sha256:kb") is None


def test_container_interfaces_coming_and_going_do_not_make_a_plan_stale() -> None:
    net = {"interfaces": [{"name": "enp5s0", "up": True, "ipv4": ["10.0.0.2/24"]}]}
    base = {**FACTS, "network": net}
    churn = [{"name": n, "up": True, "ipv4": []} for n in ("veth1a2b3c", "docker0", "br-4f2a")]
    now = {**FACTS, "network": {"interfaces": [*net["interfaces"], *churn]}}
    assert freshness.stale_reason(_plan(base), now, "sha256:kb") is None
    moved = {**FACTS, "network": {"interfaces": [{"name": "enp5s0", "up": False, "ipv4": []}]}}
    assert "network" in (freshness.stale_reason(_plan(base, facts=base), moved, "sha256:kb") or "")


def test_changed_facts_or_knowledge_make_a_plan_stale() -> None:
    now = {**FACTS, "kernel": {"running": "5.4.0-150-generic"}}
    assert "facts changed" in (freshness.stale_reason(_plan(FACTS), now, "sha256:kb") or "")
    why = freshness.stale_reason(_plan(FACTS, facts=FACTS), now, "sha256:kb")
    assert why is not None and why.endswith(": kernel")
    assert "knowledge base" in (freshness.stale_reason(_plan(FACTS), FACTS, "sha256:other") or "")


def _report(**over: object) -> dict:
    base = {
        "python": "3.6.9",
        "dpkg": {"locks_held": [], "waited_s": 0, "audit": "", "interrupted": False},
        "disk_mib": {"/": 50000, "/boot": 900},
        "gpu_processes": [],
        "nvidia": {
            "driver_packages": ["nvidia-driver-535"],
            "dkms_sources": ["nvidia-535.183.01"],
            "prebuilt_packages": [],
        },
    }
    base.update(over)
    return base


def _checks(pf: safety.Preflight) -> list[str]:
    return [b.check for b in pf.blockers]


def test_preflight_passes_a_quiet_host() -> None:
    pf = safety.evaluate("h", _report(), strategy="kernel-upgrade", kernel_step=True)
    assert pf.ok and pf.summary() == "ok"


def test_preflight_blocks_gpu_processes_unless_forced() -> None:
    rep = _report(gpu_processes=[{"pid": "42", "name": "python"}])
    pf = safety.evaluate("h", rep, strategy="nccl-profile", kernel_step=False)
    assert _checks(pf) == ["gpu-processes"] and "python[42]" in pf.summary()
    forced = safety.evaluate(
        "h", rep, strategy="nccl-profile", kernel_step=False, force=["gpu-processes"]
    )
    assert forced.ok and forced.warnings


def test_preflight_blocks_dpkg_lock_and_half_configured() -> None:
    rep = _report(
        dpkg={
            "locks_held": ["/var/lib/dpkg/lock-frontend"],
            "waited_s": 120,
            "audit": "The following packages are only half configured",
            "interrupted": False,
        }
    )
    pf = safety.evaluate("h", rep, strategy="driver-pin", kernel_step=False)
    assert _checks(pf) == ["dpkg-lock", "dpkg-broken"]
    assert "120 s" in pf.summary() and "dpkg --configure -a" in pf.summary()


def test_preflight_checks_disk_for_the_strategy() -> None:
    rep = _report(disk_mib={"/": 50000, "/boot": 120})
    assert _checks(safety.evaluate("h", rep, strategy="kernel-upgrade", kernel_step=True)) == [
        "disk"
    ]
    assert safety.evaluate("h", rep, strategy="nccl-profile", kernel_step=False).ok


def test_preflight_kernel_step_needs_a_way_to_an_nvidia_module() -> None:
    rep = _report(
        nvidia={
            "driver_packages": ["nvidia-driver-535"],
            "dkms_sources": [],
            "prebuilt_packages": [],
        }
    )
    pf = safety.evaluate("h", rep, strategy="kernel-upgrade", kernel_step=True)
    assert _checks(pf) == ["nvidia-module"]
    assert safety.evaluate("h", rep, strategy="nccl-profile", kernel_step=False).ok


@pytest.mark.parametrize(
    ("version", "ok"),
    [
        ("2.7.18", True),
        ("3.6.9", True),
        ("3.12.1", True),
        ("3.5.2", False),
        ("2.6.9", False),
        ("", False),
    ],
)
def test_python_manageable_by_ansible_core_2_16(version: str, ok: bool) -> None:
    assert safety.python_manageable(version) is ok
    pf = safety.evaluate("h", _report(python=version), strategy="nccl-profile", kernel_step=False)
    assert pf.ok is ok and pf.unreachable is (not ok)


def test_rollback_vars_reverse_the_journal() -> None:
    rec = {
        "rebooted": True,
        "steps": [{"files": ["/etc/nccl.conf"]}],
        "before": {
            "packages": {"nvidia-driver-535": "535.183.01", "linux-image-4.15.0-213-generic": "1"},
            "holds": ["nvidia-driver-535"],
            "files": {"/etc/nccl.conf": {"exists": False}, "/etc/other": {"exists": False}},
            "kernel": {"running": "4.15.0-213-generic"},
        },
        "after": {
            "packages": {
                "nvidia-driver-535": "535.216.01",
                "linux-image-4.15.0-213-generic": "1",
                "linux-image-5.4.0-150-generic": "2",
            },
            "holds": [],
            "files": {
                "/etc/nccl.conf": {"exists": True, "content_b64": "eA=="},
                "/etc/other": {"exists": False},
            },
        },
    }
    v = rollback.rollback_vars({**rec, "strategy": "nccl-profile"})
    assert v["gpufix_rollback_install"] == {"nvidia-driver-535": "535.183.01"}
    assert v["gpufix_rollback_remove"] == ["linux-image-5.4.0-150-generic"]
    assert v["gpufix_rollback_hold"] == ["nvidia-driver-535"] and v["gpufix_rollback_unhold"] == []
    assert v["gpufix_rollback_files"] == {"/etc/nccl.conf": {"exists": False}}
    assert v["gpufix_rollback_kernel"] == "4.15.0-213-generic" and v["gpufix_rollback_reboot"]


def test_rollback_removes_the_venv_the_run_created_and_names_the_one_it_moved() -> None:
    """A review (2026-12-06): `gpufix rollback` left a cuda-downgrade's venv whatever it was.
    One the run created goes; one it moved stays, and the journal says what it left."""
    stack = {"torch": "1.12.1+cu113", "transformers": "4.30.2", "accelerate": "0.20.3"}
    moved = {**stack, "torch": "2.1.2+cu118"}
    venv = "/opt/gpufix/venv"

    def rec(before: dict | None, after: dict | None) -> dict:
        state = {"packages": {"bash": "1"}, "files": {}, "kernel": {"running": "5.4.0-150-generic"}}
        return {
            "strategy": "cuda-downgrade",
            "steps": [{"playbook": "cuda_downgrade.yml", "state": "done"}],
            "before": {**state, **({"ml_venv": before} if before is not None else {})},
            "after": {**state, **({"ml_venv": after} if after is not None else {})},
        }

    created = rec({"path": venv, "exists": False}, {"path": venv, "exists": True, "stack": moved})
    assert rollback.rollback_vars(created)["gpufix_rollback_ml_venv_remove"] is True
    assert rollback.venv_kept(created) == ""
    was_there = rec(
        {"path": venv, "exists": True, "stack": stack},
        {"path": venv, "exists": True, "stack": moved},
    )
    assert rollback.rollback_vars(was_there)["gpufix_rollback_ml_venv_remove"] is False
    kept = rollback.venv_kept(was_there)
    assert "torch 1.12.1+cu113 -> 2.1.2+cu118" in kept and "transformers" not in kept
    assert kept.startswith("/opt/gpufix/venv stays as the run left it")
    # a journal from before the venv was recorded, or a state not read: nothing removed
    for unknown in (rec(None, {"path": venv, "exists": True}), rec({"exists": False}, None)):
        assert rollback.rollback_vars(unknown)["gpufix_rollback_ml_venv_remove"] is False
    rolevars.check_vars("rollback.yml", rollback.rollback_vars(created), "test")
    with pytest.raises(InvalidInput):
        rolevars.check_vars("rollback.yml", {"gpufix_rollback_ml_venv_remove": "yes"}, "test")


def test_validate_refuses_snapshot_hosts_and_foreign_playbooks(tmp_path: Path) -> None:
    inv = tmp_path / "inv.yml"
    inv.write_text("all:\n  hosts:\n    h1:\n      gpufix_snapshot: h1.json\n    h2: {}\n")
    with pytest.raises(InvalidInput, match="recorded snapshot"):
        rollout.validate([_plan(FACTS)], inv)
    bad = _plan(FACTS)
    object.__setattr__(bad, "host", "h2")
    object.__setattr__(bad, "steps", [Step("../../evil.yml", "", {})])
    with pytest.raises(InvalidInput, match="is not a strategy's"):
        rollout.validate([bad], inv)
    with pytest.raises(InvalidInput, match="no plans"):
        rollout.validate([], inv)


def test_reboot_allowed_vars_are_gated_by_allow_reboot() -> None:
    step = Step("kernel_upgrade.yml", "", {"gpufix_kernel_reboot_allowed": True, "x": 1})
    # (step_vars only gates; rolevars refuses the unknown "x" before any run)
    key = "gpufix_kernel_reboot_allowed"
    assert phases.step_vars(step, allow_reboot=False, check=False) == {key: False, "x": 1}
    assert phases.step_vars(step, allow_reboot=True, check=False)[key] is True
    assert phases.step_vars(step, allow_reboot=True, check=True)[key] is False
    no = Step("kernel_upgrade.yml", "", {key: False})
    assert phases.step_vars(no, allow_reboot=True, check=False)[key] is False


def test_a_role_that_reboots_waits_the_reboot_timeout() -> None:
    """--reboot-timeout reaches the roles that reboot by themselves (their *_reboot_timeout), as
    it reaches playbooks/reboot.yml; a step without a reboot gets nothing added."""
    step = Step("pcie_acs.yml", "", {"gpufix_pcie_acs_reboot_allowed": True})
    out = phases.step_vars(step, allow_reboot=True, check=False, reboot_timeout=1800)
    assert out == {"gpufix_pcie_acs_reboot_allowed": True, "gpufix_pcie_acs_reboot_timeout": 1800}
    plain = Step("nccl_profile.yml", "", {"gpufix_nccl_profile_names": ["p2p-off"]})
    assert (
        phases.step_vars(plain, allow_reboot=True, check=False, reboot_timeout=1800) == plain.vars
    )
    for role in ("kernel", "pcie_acs"):  # the variable each role really reads
        assert f"gpufix_{role}_reboot_timeout" in rolevars.role_options(role)


def test_rollback_leaves_grub_alone_for_a_run_that_could_not_move_the_kernel() -> None:
    """An NCCL profile's run (no reboot, no kernel step, no linux-image package) rolls back its
    files only: making the old kernel GRUB's saved default again is for runs that could boot
    another kernel. Found on the lab: rolling back an interim rewrote GRUB's saved default."""
    rec = {
        "strategy": "nccl-profile",
        "rebooted": False,
        "steps": [{"playbook": "nccl_profile.yml", "state": "done", "files": ["/etc/nccl.conf"]}],
        "before": {"packages": {}, "files": {"/etc/nccl.conf": {"exists": False}},
                   "kernel": {"running": "5.4.0-150-generic"}},
        "after": {"packages": {}, "files": {"/etc/nccl.conf": {"exists": True}}},
    }  # fmt: skip
    v = rollback.rollback_vars(rec)
    assert v["gpufix_rollback_kernel"] == "" and v["gpufix_rollback_files"]
    kernel_step = {**rec, "steps": [{"playbook": "kernel_upgrade.yml", "state": "done"}]}
    assert rollback.rollback_vars(kernel_step)["gpufix_rollback_kernel"] == "5.4.0-150-generic"
    new_image = {
        **rec,
        "after": {**rec["after"], "packages": {"linux-image-5.15.0-1-generic": "1"}},
    }
    assert rollback.rollback_vars(new_image)["gpufix_rollback_kernel"] == "5.4.0-150-generic"
    failed_step = {k: v for k, v in rec.items() if k != "after"}  # no after-state was read
    assert rollback.rollback_vars(failed_step)["gpufix_rollback_kernel"] == "5.4.0-150-generic"


def test_the_verification_record_keeps_the_job_settings_and_the_culprit() -> None:
    from gpufix.apply.after import verdict_summary

    v = {"verdict": "failed", "job_env": {"NCCL_ALGO": "Tree", "NCCL_PROTO": "LL"},
         "job_env_culprit": "NCCL_PROTO", "nccl_log_tail": ["x"]}  # fmt: skip
    kept = verdict_summary(v, None)
    assert kept["job_env_culprit"] == "NCCL_PROTO" and kept["job_env"] == v["job_env"]
    assert "nccl_log_tail" not in kept


def test_a_failed_step_whose_host_cannot_be_read_is_not_rolled_back_blind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No after-state (the step failed first) and the host does not answer now: refused with the
    reason, the journal untouched, no rollback playbook run (tests/e2e covers a host that
    answers: what the step installed is removed)."""
    from gpufix.apply.journal import FileJournal
    from gpufix.errors import GpufixError

    monkeypatch.setenv("GPUFIX_STATE_DIR", str(tmp_path / "state"))
    steps = [{"playbook": "kernel_upgrade.yml", "vars": {}}]
    j = FileJournal.start(
        [{"host": "h1", "strategy": "kernel-upgrade", "steps": steps}],
        plan_digest="sha256:x",
        options={"inventory": str(tmp_path / "inv.yml")},
        plan_file="plan.json",
    )
    j.update("h1", before={"packages": {"linux-image-generic": "4.15.0.213.196"}})
    j.step_started("h1", 0)
    j.step_finished("h1", 0, ok=False, changed=3, files=[], message="no NVIDIA kernel module")
    lost = safety.unreachable("h1", "ssh: connect to host h1 port 22: No route to host")
    monkeypatch.setattr(safety, "run_preflight", lambda *a, **k: {"h1": lost})
    ran: list[str] = []
    monkeypatch.setattr(rollback.runner, "run_playbook", lambda name, *a, **k: ran.append(name))
    with pytest.raises(
        GpufixError, match=r"what the failed step changed cannot be read .*No route"
    ) as err:
        rollback.rollback(j, "h1", tmp_path / "inv.yml", allow_reboot=True)
    assert err.value.exit_code == 4  # unreachable, as for apply
    assert ran == [] and not j.host("h1").get("after") and j.host("h1").get("rollback") is None


def test_an_unverified_kernel_is_applied_with_a_warning_and_verified_next_time(
    tmp_path: Path,
) -> None:
    """--no-verify after a kernel step that rebooted: the new kernel was booted once (GRUB's
    one-shot entry) and is not the default, so an ordinary reboot returns to the old one. Found by
    a review on the lab: the host was `applied` with no note. It says so now, and the next apply
    of the plan probes the host and makes the kernel the default (journal.next_action)."""
    import json

    from gpufix.apply.after import UNVERIFIED_KERNEL
    from gpufix.apply.journal import Journal, next_action
    from gpufix.engine.context import Constraints
    from gpufix.engine.kb import load as load_kb
    from gpufix.engine.rules import load as load_rules
    from gpufix.planning import plan_host

    facts = json.loads((Path(__file__).parent / "fixtures/hosts/bionic-ga-2x3090.json").read_text())
    plans = {
        s: plan_host(
            facts["facts"],
            None,
            Constraints(strategy=s),
            host="h1",
            python_envs=[],
            kb=load_kb(),
            rules=load_rules(),
        )
        for s in ("kernel-upgrade", "single-gpu")
    }
    for strategy, plan in plans.items():
        j = Journal.start([{"host": "h1", "strategy": strategy, "steps": []}], plan_digest="x",
                          options={})  # fmt: skip
        j.update("h1", rebooted=True)
        opts = result.Options(tmp_path / "inv.yml", verify=False, allow_reboot=True)
        phases.Phases(j, {"h1": plan}, opts, lambda h, m: None, {}).verify(["h1"])
        rec = j.host("h1")
        assert rec["state"] == "applied"
        if strategy == "kernel-upgrade":
            assert rec["reason"] == UNVERIFIED_KERNEL and next_action(rec) == ("verify", -1)
        else:
            assert rec["reason"] == "" and next_action(rec) == ("skip", -1)


def test_resume_probes_a_host_lost_after_its_reboot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A review (2026-12-06): next_action sent it to verify, and verify passed over every
    `unreachable` host, so a host that came back late stayed unreachable for good (and its
    one-shot kernel never became GRUB's default)."""
    import json

    from gpufix import runner
    from gpufix.apply.journal import Journal, next_action
    from gpufix.engine.context import Constraints
    from gpufix.engine.kb import load as load_kb
    from gpufix.engine.rules import load as load_rules
    from gpufix.planning import plan_host

    facts = json.loads((Path(__file__).parent / "fixtures/hosts/bionic-ga-2x3090.json").read_text())
    plan = plan_host(facts["facts"], None, Constraints(strategy="kernel-upgrade"), host="h1",
                     python_envs=[], kb=load_kb(), rules=load_rules())  # fmt: skip
    steps = [{"playbook": s.playbook, "vars": s.vars} for s in plan.steps]
    j = Journal.start([{"host": "h1", "strategy": plan.strategy, "steps": steps}],
                      plan_digest="x", options={})  # fmt: skip
    for i in range(len(plan.steps)):
        j.step_started("h1", i)
        j.step_finished("h1", i, ok=True, changed=3)
    j.update("h1", rebooted=True)
    j.set_state("h1", "unreachable", "did not come back within 1200 s of the reboot")
    act = next_action(j.host("h1"))
    assert act == ("verify", -1)
    ran: list[str] = []

    def fake(name: str, *_a: object, **_k: object) -> runner.RunResult:
        ran.append(name)
        host = runner.HostResult("h1", status="unreachable", message="still down")
        return runner.RunResult("x", 4, "failed", {"h1": host})

    monkeypatch.setattr(runner, "run_playbook", fake)
    opts = result.Options(tmp_path / "inv.yml", allow_reboot=True)
    phases.Phases(j, {"h1": plan}, opts, lambda h, m: None, {}).batch(["h1"], {"h1": act})
    assert ran == ["probe.yml"]  # probed again, not passed over
    assert j.host("h1")["state"] == "unreachable"  # and still down: said so again


def _reboot_pending() -> tuple[Plan, Any]:
    """A one-step plan that needs a reboot, its step done and the host left reboot-pending."""
    from dataclasses import replace

    from gpufix.apply.journal import Journal

    plan = replace(_plan(FACTS), reboot_required=True)
    steps = [{"playbook": s.playbook, "vars": s.vars} for s in plan.steps]
    j = Journal.start([{"host": "h1", "strategy": plan.strategy, "steps": steps}],
                      plan_digest="x", options={})  # fmt: skip
    j.step_started("h1", 0)
    j.step_finished("h1", 0, ok=True, changed=1)
    j.set_state("h1", "reboot-pending", "the change needs a reboot: re-run with --allow-reboot")
    return plan, j


@pytest.mark.parametrize("force", [frozenset(), frozenset({"gpu-processes"})])
def test_a_resumed_reboot_checks_for_gpu_work_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, force: frozenset[str]
) -> None:
    """A review (2026-12-06, L6): a host left reboot-pending by a run without --allow-reboot was
    rebooted by the next apply of the plan, days later, without the host check: training jobs
    started since were killed. It is checked now, as a rollback's reboot is."""
    from gpufix import runner
    from gpufix.apply.journal import next_action

    plan, j = _reboot_pending()
    report = {"python": "3.6.9", "gpu_processes": [{"pid": 4242, "name": "python3"}]}
    checked: list[dict] = []

    def host_check(want: dict, *_a: object, **k: object) -> dict:
        checked.append(want)
        got = safety.evaluate("h1", report, strategy="none", kernel_step=False,
                              force=k.get("force", ()))  # fmt: skip
        return {"h1": got}

    ran: list[str] = []

    def play(name: str, *_a: object, **_k: object) -> runner.RunResult:
        ran.append(name)
        return runner.RunResult("x", 0, "successful", {"h1": runner.HostResult("h1", "ok")})

    monkeypatch.setattr(safety, "run_preflight", host_check)
    monkeypatch.setattr(runner, "run_playbook", play)
    opts = result.Options(tmp_path / "inv.yml", allow_reboot=True, verify=False, force=force)
    act = ("reboot", -1)  # what apply decides for a reboot-pending host under --allow-reboot
    phases.Phases(j, {"h1": plan}, opts, lambda h, m: None, {}).batch(["h1"], {"h1": act})
    assert checked, "no host check before the reboot"
    rec = j.host("h1")
    if force:
        assert ran == ["reboot.yml"] and rec["rebooted"]
    else:
        assert ran == [] and not rec.get("rebooted")
        assert rec["state"] == "reboot-pending" and "python3[4242]" in rec["reason"]
        assert next_action(rec) == ("skip", -1)  # and apply --allow-reboot tries again


@pytest.mark.parametrize(
    "got, state, said",
    [
        (safety.Preflight("h1", (safety.Blocker("preflight", "preflight failed: boom"),)),
         "reboot-pending", "preflight failed: boom"),
        (safety.evaluate("h1", {"python": "3.6.9", "dpkg": {"locks_held": ["/var/lib/dpkg/lock"]}},
                         strategy="none", kernel_step=False), "reboot-pending", "dpkg/apt lock"),
        (safety.evaluate("h1", {"python": "3.6.9", "dpkg": {"audit": "half-configured: x"}},
                         strategy="none", kernel_step=False), "reboot-pending", "dpkg --configure"),
        (safety.unreachable("h1", "ssh: no route to host"), "unreachable", "no route"),
    ],
)  # fmt: skip
def test_a_reboot_waits_for_a_host_it_cannot_read_or_that_runs_packages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, got: safety.Preflight, state: str, said: str
) -> None:
    """Before 2026-12-06 a resumed reboot and a rollback's reboot held only for GPU processes:
    a host check that failed (no report, so nobody knew what ran there), an apt run holding the
    dpkg lock or a half-configured dpkg let the reboot go ahead. Both hold now, with the reason."""
    from gpufix import runner
    from gpufix.errors import GpufixError

    plan, j = _reboot_pending()
    monkeypatch.setattr(safety, "run_preflight", lambda *a, **k: {"h1": got})
    ran: list[str] = []

    def play(name: str, *_a: object, **_k: object) -> runner.RunResult:
        ran.append(name)
        return runner.RunResult("x", 0, "successful", {"h1": runner.HostResult("h1", "ok")})

    monkeypatch.setattr(runner, "run_playbook", play)
    opts = result.Options(tmp_path / "inv.yml", allow_reboot=True, verify=False)
    phases.Phases(j, {"h1": plan}, opts, lambda h, m: None, {}).batch(
        ["h1"], {"h1": ("reboot", -1)}
    )
    rec = j.host("h1")
    assert ran == [] and not rec.get("rebooted")
    assert rec["state"] == state and said in rec["reason"]
    # a rollback's reboot holds for the same reasons
    with pytest.raises(GpufixError, match="not rolling back with a reboot: .*" + said) as err:
        rollback._gpu_work("h1", tmp_path / "inv.yml", (), None)
    assert err.value.exit_code == (4 if state == "unreachable" else 1)


def test_a_resumed_host_the_check_blocks_says_it_is_part_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A review (2026-12-06, L5): resuming a run whose host had done one of two steps, the host
    check blocked it (apt held by unattended-upgrades) and the host read `blocked` with the
    check's reason alone, which reads as "nothing changed": re-planning then started a new run
    whose `before` was the half-made change. The reason says where the host stands now."""
    from gpufix.apply.journal import FileJournal, next_action

    monkeypatch.setenv("GPUFIX_STATE_DIR", str(tmp_path / "state"))
    step = Step("nccl_profile.yml", "nccl", {"gpufix_nccl_profile_names": ["default"]})
    plan = replace_steps(_plan(FACTS), [step, step])
    steps = [{"playbook": s.playbook, "vars": s.vars} for s in plan.steps]
    j = FileJournal.start([{"host": "h1", "strategy": plan.strategy, "steps": steps}],
                          plan_digest="x", options={})  # fmt: skip
    j.step_started("h1", 0)
    j.step_finished("h1", 0, ok=True, changed=1)
    report = {"python": "3.6.9", "dpkg": {"locks_held": ["/var/lib/dpkg/lock-frontend"]}}
    blocked = safety.evaluate("h1", report, strategy="nccl-profile", kernel_step=False)
    monkeypatch.setattr(safety, "run_preflight", lambda *a, **k: {"h1": blocked})
    opts = result.Options(tmp_path / "inv.yml", verify=False)
    act = next_action(j.host("h1"))
    assert act == ("step", 1)
    phases.Phases(j, {"h1": plan}, opts, lambda h, m: None, {}).batch(["h1"], {"h1": act})
    rec = j.host("h1")
    assert rec["state"] == "blocked" and "dpkg/apt lock" in rec["reason"]
    assert f"1 of 2 steps done in run {j.run_id}" in rec["reason"]
    assert f"gpufix rollback {j.run_id} h1" in rec["reason"]
    # a host the run has not changed yet keeps the check's reason alone
    fresh = FileJournal.start([{"host": "h1", "strategy": plan.strategy, "steps": steps}],
                              plan_digest="y", options={})  # fmt: skip
    phases.Phases(fresh, {"h1": plan}, opts, lambda h, m: None, {}).batch(
        ["h1"], {"h1": ("step", 0)}
    )
    assert fresh.host("h1")["reason"] == "preflight: " + blocked.summary()


def replace_steps(plan: Plan, steps: list[Step]) -> Plan:
    from dataclasses import replace

    return replace(plan, steps=steps)


def test_a_reboot_the_journal_never_heard_of_is_read_from_the_kernels() -> None:
    """A review (2026-12-06): the kernel role rebooted inside its step, the controller died
    during the wait, and the resumed step found nothing to reboot for: `rebooted` stayed false,
    and the rollback neither asked for --allow-reboot nor rebooted the host off the new kernel."""
    rec = {
        "strategy": "kernel-upgrade",
        "rebooted": False,
        "steps": [{"playbook": "kernel_upgrade.yml", "state": "done"}],
        "before": {"packages": {}, "files": {}, "kernel": {"running": "4.15.0-213-generic"}},
        "after": {"packages": {}, "files": {}, "kernel": {"running": "5.4.0-150-generic"}},
    }
    v = rollback.rollback_vars(rec)
    assert v["gpufix_rollback_reboot"] and rollback.reboots(v)
    assert v["gpufix_rollback_kernel"] == "4.15.0-213-generic"
    # an NCCL profile on the same kernel: no reboot, GRUB left alone
    same = {**rec, "strategy": "nccl-profile", "steps": [{"playbook": "nccl_profile.yml"}]}
    same["after"] = {**rec["after"], "kernel": {"running": "4.15.0-213-generic"}}
    v = rollback.rollback_vars(same)
    assert not rollback.reboots(v) and v["gpufix_rollback_kernel"] == ""


def test_a_failed_step_has_the_host_read_back_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A review (2026-12-06): a failed step left no after-state, so a `gpufix rollback` days
    later read the host then, and reverted what others had changed since (a docker-ce upgrade,
    a new kernel) as this run's doing. The host is read back when the step fails."""
    from gpufix import runner
    from gpufix.apply.journal import FileJournal

    monkeypatch.setenv("GPUFIX_STATE_DIR", str(tmp_path / "state"))
    plan = _plan(FACTS)
    steps = [{"playbook": s.playbook, "vars": s.vars} for s in plan.steps]
    j = FileJournal.start([{"host": "h1", "strategy": plan.strategy, "steps": steps}],
                          plan_digest="x", options={})  # fmt: skip
    j.update("h1", before=_report(packages={"docker-ce": "24.0.7"}, holds=[], files={},
                                  kernel={"running": "5.4.0-150-generic", "installed": []}))  # fmt: skip
    at_failure = _report(packages={"docker-ce": "24.0.7", "libnccl2": "2.21.5"}, holds=[],
                         files={}, kernel={"running": "5.4.0-150-generic", "installed": []})  # fmt: skip
    at_failure["nvidia"] = {**at_failure["nvidia"], "modules_by_kernel": {}}
    ran: list[str] = []

    def fake(name: str, *_a: object, **_k: object) -> runner.RunResult:
        ran.append(name)
        if name == "host_check.yml":
            hr = runner.HostResult("h1", data={"gpufix_preflight": at_failure})
        else:
            hr = runner.HostResult("h1", status="failed", message="apt failed")
        return runner.RunResult("x", 0, "successful", {"h1": hr})

    monkeypatch.setattr(runner, "run_playbook", fake)
    opts = result.Options(tmp_path / "inv.yml", rollback_on_failure=False)
    phases.Phases(j, {"h1": plan}, opts, lambda h, m: None, {}).steps(["h1"], 0)
    rec = j.host("h1")
    assert ran == ["nccl_profile.yml", "host_check.yml"] and rec["state"] == "failed"
    assert rec["after"]["packages"] == {"docker-ce": "24.0.7", "libnccl2": "2.21.5"}
    # so a later rollback removes what the step installed and nothing changed since
    assert rollback.rollback_vars(rec)["gpufix_rollback_remove"] == ["libnccl2"]


def test_only_a_resumed_host_left_rebooting_gets_the_lock_wait() -> None:
    from gpufix.apply.journal import Journal

    j = Journal.start([{"host": h, "strategy": "kernel-upgrade", "steps": []} for h in "abc"],
                      plan_digest="x", options={})  # fmt: skip
    j.set_state("a", "rebooting")
    j.set_state("b", "unreachable", "did not come back within 1200 s of the reboot")
    assert rollout._rebooting(j, ["a", "b", "c"], "resume") == ["a"]
    assert rollout._rebooting(j, ["a", "b", "c"], "retry") == []
    assert rollout._rebooting(None, ["a"], "new") == []
