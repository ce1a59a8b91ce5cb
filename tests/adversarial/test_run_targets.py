"""A run is tied to the machines it changed: a resume or a rollback given an inventory that now
points a host's name elsewhere (another file, or the same file edited) is refused before
anything runs. Found by a review on the lab (2026-12-05): a resume with another inventory ran
the rest of a kernel upgrade, and its reboot, on a machine the run had never looked at."""

from __future__ import annotations

from pathlib import Path

import pytest
from gpufix.apply.journal import FileJournal
from gpufix.apply.result import Options
from gpufix.apply.rollout import Applier, plans_digest
from gpufix.errors import InvalidInput

from .conftest import CliRun, facts, make_plan


def inventory(path: Path, address: str) -> Path:
    path.write_text(f"all:\n  hosts:\n    h1:\n      ansible_host: {address}\n")
    return path


def half_done(inv: Path, digest: str, strategy: str, steps: list[dict]) -> FileJournal:
    """A run that changed h1 at 192.0.2.1 and stopped before its reboot."""
    j = FileJournal.start(
        [{"host": "h1", "strategy": strategy, "steps": steps}],
        plan_digest=digest,
        options={"inventory": str(inv)},
    )
    j.update("h1", target={"ansible_host": "192.0.2.1"}, before={"packages": {}})
    j.step_started("h1", 0)
    j.step_finished("h1", 0, ok=True, changed=2, files=[])
    j.set_state("h1", "reboot-pending", "reboot not allowed")
    j.finish("stopped")
    return j


@pytest.mark.parametrize("how", ["another file", "the same file edited"])
def test_a_resume_on_another_machine_is_refused(tmp_path: Path, how: str) -> None:
    plan = make_plan(facts("bionic-ga-2x3090")["facts"])
    first = inventory(tmp_path / "site-a.yml", "192.0.2.1")
    digest = plans_digest([plan], "permanent")
    steps = [{"playbook": s.playbook, "vars": s.vars} for s in plan.steps]
    half_done(first, digest, plan.strategy, steps)
    given = tmp_path / "site-b.yml" if how == "another file" else first
    inventory(given, "192.0.2.9")
    rollout = Applier([plan], Options(given, allow_reboot=True), fresh_facts=False)
    with pytest.raises(InvalidInput, match=r"points h1 at ansible_host=192\.0\.2\.9.*192\.0\.2\.1"):
        rollout._decide(digest)
    inventory(given, "192.0.2.1")  # the same machine: the run resumes
    assert rollout._decide(digest)[2] == "resume"


def test_a_rollback_on_another_machine_is_refused(cli: CliRun, tmp_path: Path) -> None:
    first = inventory(tmp_path / "site-a.yml", "192.0.2.1")
    steps = [{"playbook": "nccl_profile.yml", "vars": {}}]
    j = half_done(first, "sha256:x", "nccl-profile", steps)
    other = inventory(tmp_path / "site-b.yml", "192.0.2.9")
    code, _, err = cli("rollback", j.run_id, "h1", "-i", str(other))
    assert code == 3 and "not rolling h1 back" in err and "192.0.2.9" in err, err
    assert FileJournal.open(j.run_id).host("h1")["state"] == "reboot-pending"


def test_a_run_from_before_targets_were_recorded_is_held_to_its_inventory_file(
    cli: CliRun, tmp_path: Path
) -> None:
    first = inventory(tmp_path / "site-a.yml", "192.0.2.1")
    j = FileJournal.start(
        [{"host": "h1", "strategy": "nccl-profile", "steps": [{"playbook": "nccl_profile.yml"}]}],
        plan_digest="sha256:y",
        options={"inventory": str(first)},
    )
    j.update("h1", before={"packages": {}})
    j.step_started("h1", 0)
    j.step_finished("h1", 0, ok=True, changed=1, files=[])
    j.finish("complete")
    other = inventory(tmp_path / "site-b.yml", "192.0.2.1")
    code, _, err = cli("rollback", j.run_id, "h1", "-i", str(other))
    assert code == 3 and "the run used inventory" in err and "site-a.yml" in err, err
