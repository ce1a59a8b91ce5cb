"""Ray GPU workers: code whose ranks Ray Tune or Ray core run as actors with GPUs of their own
sees only those GPUs, so GPU 0 is each worker's own (GPF005, GPF006, GPF008).

Ray sets CUDA_VISIBLE_DEVICES for each task and actor to the GPUs it was given
(https://docs.ray.io/en/latest/ray-core/scheduling/accelerators.html), unless
RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES is set (ray/_private/accelerators/nvidia_gpu.py).
Tune's DistributedTrainableCreator runs each rank as such an actor ("automatically sets
CUDA_VISIBLE_DEVICES for each training worker": ray/tune/integration/torch.py). Ray Train does
not: its Torch backend gives every worker on a node all of that node's workers' GPUs
(`Backend.share_cuda_visible_devices`,
https://docs.ray.io/en/latest/train/api/doc/ray.train.backend.Backend.html). So a module that
uses Ray Train, switches Ray's setting off, starts ranks of its own inside a worker
(multiprocessing, a subprocess, torchrun, an elastic launch, Lightning, accelerate, DeepSpeed)
or reads a launcher's LOCAL_RANK is left to the rules, and so is a fractional GPU (two actors
on one GPU). Written on spacecraft1013/NIH-X-Ray's Tune script (two GPF008 rows judged FP).
"""

from __future__ import annotations

import ast

from .callsites import keyword
from .project import SourceFile
from .rankcode import PROCESS_MODULES

# Calls that hand a function to Ray workers placed with GPUs of their own.
_GPU_WORKERS = frozenset(
    {
        "ray.tune.integration.torch.DistributedTrainableCreator",
        "ray.util.sgd.torch.DistributedTrainableCreator",
        "ray.tune.run",
        "ray.tune.Tuner",
        "ray.tune.with_resources",
    }
)
# Ray launchers whose workers share a node's GPUs (Ray Train and RaySGD v2, its first version).
_SHARED = ("ray.train", "ray.air", "ray.util.sgd.v2")
# Ranks started inside a worker (they share its GPUs): process starters, and frameworks that
# start or place their own ranks.
_OWN_RANKS = (
    *PROCESS_MODULES,
    "torch.distributed.elastic.",
    "subprocess.",
    "lightning.",
    "pytorch_lightning.",
    "accelerate.",
    "deepspeed.",
)
# Words that mean ranks are started another way, or that Ray leaves CUDA_VISIBLE_DEVICES alone.
_OTHER_LAUNCH = (
    b"RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES",
    b"torchrun",
    b"torch.distributed.run",
    b"torch.distributed.launch",
    b"elastic_launch",
    b"LOCAL_RANK",
)


def ray_gpu_workers(sf: SourceFile) -> bool:
    """The module hands its work to Ray workers that each see only their own GPUs."""
    cached = sf.cache.get("ray-gpu-workers")
    if cached is None:
        cached = (
            b"ray" in sf.data
            and any(v == "ray" or v.startswith("ray.") for v in sf.names.imports.values())
            and not any(w in sf.data for w in _OTHER_LAUNCH)
            and sf.tree is not None
            and _hands_to_ray(sf, sf.tree)
        )
        sf.cache["ray-gpu-workers"] = cached
    return bool(cached)


def _hands_to_ray(sf: SourceFile, tree: ast.AST) -> bool:
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    names = [sf.names.resolve(c.func) or "" for c in calls]
    if any(n.startswith(_SHARED) for n in names):
        return False
    if any(n.startswith(_OWN_RANKS) for n in names):
        return False  # ranks of its own inside a worker share the worker's GPUs
    if any(n in _GPU_WORKERS for n in names):
        return True
    return any(
        (n == "ray.remote" or _is_options(c)) and _whole_gpus(keyword(c, "num_gpus"))
        for c, n in zip(calls, names, strict=True)
    )


def _is_options(call: ast.Call) -> bool:
    """`Actor.options(num_gpus=...)`: Ray's per-call resources."""
    return isinstance(call.func, ast.Attribute) and call.func.attr == "options"


def _whole_gpus(value: ast.expr | None) -> bool:
    """One GPU or more each: a fraction puts several actors on one GPU. A value not written
    as a number is taken as whole."""
    if value is None:
        return False
    if isinstance(value, ast.Constant) and isinstance(value.value, (int, float)):
        return not isinstance(value.value, bool) and value.value >= 1
    return True
