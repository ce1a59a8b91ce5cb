"""single-gpu: the workaround: CUDA_VISIBLE_DEVICES=0 for login shells."""

from __future__ import annotations

from gpufix.engine.context import Candidate, Ctx
from gpufix.engine.plan import Step
from gpufix.strategies.base import Strategy
from gpufix.strategies.evidence import not_multi_gpu

PLAYBOOK = "single_gpu.yml"


def evaluate(ctx: Ctx) -> Candidate:
    blocked = not_multi_gpu(ctx, "single-gpu", per_host=True)
    if blocked is not None:
        # Hiding GPUs changes nothing on a host with fewer than two, or one nobody could count.
        return blocked
    step = Step(
        PLAYBOOK,
        "export CUDA_VISIBLE_DEVICES=0 for login shells (/etc/profile.d), set before torch is imported",
        {
            "gpufix_nccl_profile_single_gpu_index": 0,
            "gpufix_nccl_profile_single_gpu_state": "present",
        },
    )
    return Candidate(
        "single-gpu",
        True,
        "a workaround: training uses one GPU",
        [step],
        # profile.d reaches login shells only (docs/roles.md, nccl_profile's single-GPU file)
        "jobs started from a login shell see one GPU: no NCCL, no hang, and one GPU's "
        "throughput; systemd units, cron, containers and batch scripts that are not login shells "
        "need CUDA_VISIBLE_DEVICES=0 set themselves",
        ["a workaround, not a fix: remove it once a real fix lands"],
    )


STRATEGY = Strategy(
    name="single-gpu",
    evaluate=evaluate,
    playbook=PLAYBOOK,
    watched_files=("/etc/nccl.conf", "/etc/profile.d/gpufix-single-gpu.sh"),
    disk_need_mib=(0, 16),
    reboot_after_restore=False,
)
