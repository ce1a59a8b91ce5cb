"""Plan files for the lab, made from the hosts' real facts (so the stale-plan check is real)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpufix.engine.decide import stable_facts
from gpufix.engine.kb import load as load_kb
from gpufix.engine.plan import Plan, Step, digest, save_plans
from gpufix.facts.collect import gather

# The HWE kernel plus the prebuilt NVIDIA module for it (the fixture has no DKMS build).
KERNEL_STEP = Step(
    "kernel_upgrade.yml",
    "install the HWE kernel, boot it once, make it default once it booted",
    {
        "gpufix_kernel_packages": [
            "linux-generic-hwe-18.04",
            "linux-modules-nvidia-535-5.4.0-150-generic",
        ],
        "gpufix_kernel_reboot_allowed": True,
    },
    reboot=True,
)
KERNEL_NO_MODULE_STEP = Step(
    "kernel_upgrade.yml",
    "install the HWE kernel only (no NVIDIA module for it)",
    {"gpufix_kernel_packages": ["linux-generic-hwe-18.04"], "gpufix_kernel_reboot_allowed": True},
    reboot=True,
)
NCCL_STEP = Step(
    "nccl_profile.yml",
    "write /etc/nccl.conf from profiles no-p2p",
    {"gpufix_nccl_profile_names": ["no-p2p"]},
)


def make_plans(
    hosts: list[str], inventory: Path, strategy: str, steps: list[Step], out: Path
) -> list[Plan]:
    kb = load_kb()
    plans = []
    for g in gather(",".join(hosts), inventory):
        assert g.snapshot is not None, g.error
        facts: dict[str, Any] = dict(g.snapshot.facts)
        plans.append(
            Plan(
                host=g.host,
                strategy=strategy,
                findings=[],
                options=[],
                steps=list(steps),
                reboot_required=any(s.reboot for s in steps),
                outcome="",
                risks=[],
                path=["e2e: plan written by the test"],
                facts_digest=digest(stable_facts(facts)),
                kb_digest=str(kb.digest),
                extra={"facts": facts},
            )
        )
    order = {h: i for i, h in enumerate(hosts)}
    plans.sort(key=lambda p: order[p.host])
    save_plans(plans, out)
    return plans
