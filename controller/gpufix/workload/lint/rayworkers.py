"""Ray GPU workers: code whose ranks Ray Tune or Ray core run as actors with GPUs of their own
sees only those GPUs, so GPU 0 is each worker's own (GPF005, GPF006, GPF008).

Ray sets CUDA_VISIBLE_DEVICES for each task and actor to the GPUs it was given
(https://docs.ray.io/en/latest/ray-core/scheduling/accelerators.html). Tune's
DistributedTrainableCreator runs each rank as such an actor ("automatically sets
CUDA_VISIBLE_DEVICES for each training worker": ray/tune/integration/torch.py). Ray Train does
not: its Torch backend gives every worker on a node all of that node's workers' GPUs
(`Backend.share_cuda_visible_devices`,
https://docs.ray.io/en/latest/train/api/doc/ray.train.backend.Backend.html), so a module that
uses Ray Train, or starts processes of its own inside a worker, is left to the rules. Written on
spacecraft1013/NIH-X-Ray's Tune script (two GPF008 rows judged FP).
"""

from __future__ import annotations

from .callsites import call_sites, keyword
from .project import SourceFile
from .rankcode import STARTS_PROCESSES

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
# Ray's own launchers whose workers share a node's GPUs (Ray Train, RaySGD's TorchTrainer).
_SHARED = ("ray.train", "ray.util.sgd.torch.TorchTrainer", "ray.air")


def ray_gpu_workers(sf: SourceFile) -> bool:
    """The module hands its work to Ray workers that each see only their own GPUs."""
    cached = sf.cache.get("ray-gpu-workers")
    if cached is None:
        cached = (b"ray." in sf.data or b"from ray" in sf.data) and _hands_to_ray(sf)
        sf.cache["ray-gpu-workers"] = cached
    return bool(cached)


def _hands_to_ray(sf: SourceFile) -> bool:
    names = [c.name or "" for c in call_sites(sf)]
    if any(n.startswith(_SHARED) for n in names):
        return False
    if any(n.rsplit(".", 1)[-1] in STARTS_PROCESSES for n in names):
        return False  # processes of its own inside a worker share the worker's GPUs
    if any(n in _GPU_WORKERS for n in names):
        return True
    return any(
        c.name == "ray.remote" and keyword(c.node, "num_gpus") is not None for c in call_sites(sf)
    )
