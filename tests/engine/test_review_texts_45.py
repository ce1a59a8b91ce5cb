"""What outside reviews (2026-12-07, the nineteenth to twenty-third) found false or unread in
plans: a soak that hung beside a main run written "healthy" (as docs/probe.md's example had it)
was "the probe passed"; "probe not healthy in a collective phase" for runs that stopped in
process-group set-up; "driver the installed version (not in the facts) loaded and held"."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from gpufix.engine import decide as engine
from gpufix.engine.kb import load
from gpufix.engine.rules import load as load_rules

decide = partial(engine.decide, kb=load(), rules=load_rules())
HOSTS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"


def facts(name: str = "focal-4x4090.json") -> dict[str, Any]:
    f: dict[str, Any] = json.loads((HOSTS / name).read_text())["facts"]
    return f


def verdict(**more: Any) -> dict[str, Any]:
    return {"format": "gpufix-probe", "version": 1, "verdict": "healthy", "backend": "nccl",
            "world_size": 2, "stalled": None, "failed_in": None, "error": None, "causes": [],
            "experiments": [], "decided_by": None, **more}  # fmt: skip


SOAK_HUNG = {"sizes": [1024, 4096], "iters": 20, "verdict": "hung", "stalled_at_bytes": None,
             "results": []}  # fmt: skip


def test_a_hung_soak_beside_a_healthy_main_run_is_read() -> None:
    plan = decide(facts(), verdict(soak=SOAK_HUNG))
    assert plan.extra["decision"]["row"] == "soak-stalled"
    assert not any("probe healthy" in line for line in plan.path)
    assert not any("one message size after clean" in line for line in plan.path)
    assert plan.probe_verdict == "hung"


def test_a_healthy_soak_stays_healthy() -> None:
    plan = decide(facts(), verdict(soak={**SOAK_HUNG, "verdict": "healthy"}))
    assert plan.strategy == "none"
    assert any("probe healthy" in line for line in plan.path)


def test_a_pg_init_stall_is_not_called_a_collective_phase() -> None:
    v = verdict(verdict="hung", stalled={"phase": "pg_init", "ranks": [0, 1]})
    plan = decide(facts(), v)
    text = " ".join(plan.path)
    assert "in a collective phase" not in text
    assert "process-group set-up or a collective" in text and "from pg_init on" not in text


def test_the_driver_outcome_reads_when_the_version_is_unknown() -> None:
    f = facts("a100-fm-mismatch.json")
    f["driver"] = {"unknown": "not stated"}
    failed = verdict(verdict="failed", failed_in={"phase": "cuda_init", "ranks": [0, 1]},
                     error="CUDA error: system not yet initialized")  # fmt: skip
    plan = decide(f, failed)
    assert plan.strategy == "driver-pin"
    assert plan.outcome.startswith("driver: the installed version (not in the facts); loaded")


def test_a_stack_move_says_the_venv_holds_three_packages() -> None:
    """verifiers#208 (a review): "training runs from /opt/gpufix/venv", though the job's vLLM
    is not in it."""
    failed = verdict(verdict="failed", failed_in={"phase": "allreduce", "ranks": [0, 1]},
                     error="NCCL WARN Cuda failure 'invalid argument'")  # fmt: skip
    plan = decide(facts(), failed)
    assert plan.strategy == "cuda-downgrade"
    assert any("torch, transformers and accelerate only" in r for r in plan.risks)


def test_a_failed_soak_beside_a_healthy_main_run_is_an_error() -> None:
    """The soak's failure reaches nccl_issues.yaml's `kind` as an error, as the probe's own
    verdict would (`failed` in `soak`)."""
    plan = decide(facts(), verdict(soak={**SOAK_HUNG, "verdict": "failed"}))
    assert plan.extra["decision"]["row"] == "soak-stalled"
    ctx = engine.context(facts(), verdict(soak={**SOAK_HUNG, "verdict": "failed"}),
                         engine.Constraints(), load(), load_rules())  # fmt: skip
    assert ctx.signals is not None and ctx.signals.kind == "error"


def test_a_rendezvous_stall_with_no_layer_written_is_the_rendezvous_layer() -> None:
    """A review (2026-12-07, Lightning#8707 under Slurm): a stall in `rendezvous` with
    `failed_layer` null read as a collective stall "from pg_init on" and got a torch upgrade."""
    v = verdict(verdict="hung", scope="multi-node", hosts=["n1", "n2"], failed_layer=None,
                failed_hosts=[], stalled={"phase": "rendezvous", "ranks": [1]})  # fmt: skip
    plan = decide(facts(), v)
    assert (plan.strategy, plan.extra["decision"]["row"]) == ("none", "layer-rendezvous")
    assert not any("pg_init" in line for line in plan.path)
    host = verdict(verdict="hung", stalled={"phase": "rendezvous", "ranks": [1]})
    plan = decide(facts(), host)
    assert plan.extra["decision"]["row"] == "layer-rendezvous"
    assert not any("multi-node probe" in line for line in plan.path)


def test_cuda_803_without_a_host_mismatch_is_the_image_not_a_driver_reboot() -> None:
    """A review (2026-12-07, awsome-distributed-ai#314: nccl-tests in a container failed with
    "system has unsupported display driver / cuda driver combination"; a newer cuda-compat in
    the image fixed it) got driver-pin, "kernel module and user-space driver differ", on facts
    that showed no mismatch."""
    text = "Test CUDA failure common.cu:894 'system has unsupported display driver / cuda driver combination'"
    failed = verdict(
        verdict="failed", failed_in={"phase": "cuda_init", "ranks": [0, 1]}, error=text
    )
    plan = decide(facts(), failed)
    assert (plan.strategy, plan.extra["decision"]["row"]) == ("none", "text-compat-mismatch")
    f = facts()
    f["driver"]["mismatch"] = True
    plan = decide(f, failed)
    assert plan.extra["decision"]["row"] == "text-compat-mismatch-host"
    assert plan.strategy == "driver-pin"


def test_shm_permission_denied_is_the_mode_not_the_size() -> None:
    """A review (2026-12-07, nccl#328: "Call to shm_open failed : Permission denied" on a host,
    fixed by chmod 777 /dev/shm) got "shm-exhausted" and the training container's /dev/shm."""
    text = ("RuntimeError: NCCL error in ProcessGroupNCCL.cpp:290, unhandled system error; "
            "include/shm.h:27 NCCL WARN Call to shm_open failed : Permission denied; "
            "include/shm.h:48 NCCL WARN Error while creating shared memory segment nccl-shm-recv")  # fmt: skip
    failed = verdict(verdict="failed", failed_in={"phase": "pg_init", "ranks": [0, 1]}, error=text)
    plan = decide(facts(), failed)
    assert (plan.strategy, plan.extra["decision"]["row"]) == ("none", "text-shm-permission")
    assert any("chmod 1777 /dev/shm" in line for line in plan.path)


def test_the_soak_finding_and_the_stall_wording_say_what_the_verdict_says() -> None:
    """A re-read (2026-12-07): a failed soak beside a healthy main run printed "probe failed:
    None"; a stall in p2p_copy read "(from pg_init on)"."""
    plan = decide(facts(), verdict(soak={**SOAK_HUNG, "verdict": "failed"}))
    failed = next(f for f in plan.findings if f.id == "probe-failed")
    assert "None" not in failed.message and "soak" in failed.message
    copy = decide(facts(), verdict(verdict="hung", stalled={"phase": "p2p_copy", "ranks": [0, 1]}))
    assert not any("pg_init on" in line for line in copy.path)


def test_a_stack_nothing_fits_names_the_release_values_it_assumed() -> None:
    """A re-read (2026-12-07): on 16.04 with Python unread, "no torch release fits glibc unknown,
    Python unknown", though 16.04's Python 3.5 was what ruled every release out."""
    f = facts()
    f["os"] = {"id": "ubuntu", "version_id": "16.04", "codename": "xenial",
               "pretty_name": "Ubuntu 16.04.7 LTS"}  # fmt: skip
    f["python"] = {"unknown": "not stated"}
    f["python_envs"] = []
    f["pythons"] = {"unknown": "not stated"}
    f["glibc"] = {"unknown": "not stated"}
    failed = verdict(verdict="failed", failed_in={"phase": "allreduce", "ranks": [0, 1]},
                     error="NCCL WARN Cuda failure 'invalid argument'")  # fmt: skip
    plan = decide(f, failed)
    why = next(o.reason for o in plan.options if o.strategy == "cuda-downgrade")
    assert "3.5 (the release's, assumed)" in why, why


@pytest.mark.parametrize(
    "text",
    [
        # NCCL 2.12-2.21: mkstemp's template printed unfilled
        "NCCL WARN Error: failed to extend /dev/shm/nccl-XXXXXX to 4460544 bytes; NCCL WARN "
        "Error while creating shared memory segment /dev/shm/nccl-XXXXXX (size 4460544)",
        # NCCL 2.22+
        "NCCL WARN Error: failed to create shared memory file /dev/shm/nccl-XXXXXX, error "
        "Permission denied (13)",
    ],
)
def test_shm_permission_in_later_nccl_wordings_and_before_shm_off(text: str) -> None:
    """A second re-read (2026-12-07): NCCL 2.12+ word it differently, and the probe's own
    shm-off experiment (which walks around /dev/shm) decided first."""
    failed = verdict(verdict="failed", failed_in={"phase": "pg_init", "ranks": [0, 1]}, error=text)
    assert decide(facts(), failed).extra["decision"]["row"] == "text-shm-permission"
    healed = {**failed, "decided_by": "shm-off",
              "experiments": [{"id": "shm-off", "verdict": "healthy", "error": None}]}  # fmt: skip
    assert decide(facts(), healed).extra["decision"]["row"] == "text-shm-permission"


def test_a_python_read_from_the_training_environment_is_not_called_assumed() -> None:
    f = facts()
    f["os"] = {"id": "ubuntu", "version_id": "16.04", "codename": "xenial",
               "pretty_name": "Ubuntu 16.04.7 LTS"}  # fmt: skip
    f["python"] = {"unknown": "not stated"}
    f["pythons"] = {"unknown": "not stated"}
    f["glibc"] = {"unknown": "not stated"}
    f["python_envs"] = [{"python": "/opt/env/bin/python", "version": "3.5.2",
                         "packages": {"torch": "1.0.0"}}]  # fmt: skip
    failed = verdict(verdict="failed", failed_in={"phase": "allreduce", "ranks": [0, 1]},
                     error="NCCL WARN Cuda failure 'invalid argument'")  # fmt: skip
    why = next(o.reason for o in decide(f, failed).options if o.strategy == "cuda-downgrade")
    assert "Python 3.5," in why or "Python 3.5 and" in why, why
    assert "Python 3.5 (the release's" not in why
