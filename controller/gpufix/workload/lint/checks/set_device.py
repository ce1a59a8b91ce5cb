"""GPF006: a process group started where no rank selects its GPU, and the code then uses "the
current GPU" (GPU 0 on every rank until set_device runs). Called by devices.py for the modules
that start ranks and whose GPU 0 is not each rank's own.
"""

from __future__ import annotations

import ast

from ..callerpin import pinned_by_callers
from ..callsites import (
    PROCESS_GROUP,
    SELECT_DEVICE,
    CallSite,
    call_sites,
    keyword,
    neighbours,
    one_rank_group,
)
from ..project import SourceFile
from ..visible import writes_visible_devices
from . import CheckContext

_NOT_NCCL = frozenset({"gloo", "mpi", "ucc", "hccl", "xla"})
# accelerate's process state: building it in a distributed run calls set_device(local rank)
# (accelerate src/accelerate/state.py, PartialState.set_device; Accelerator builds it).
_ACCELERATE_STATES = frozenset(
    {
        "accelerate.Accelerator",
        "accelerate.accelerator.Accelerator",
        "accelerate.PartialState",
        "accelerate.state.PartialState",
        "accelerate.state.AcceleratorState",
    }
)


# transformers' TrainingArguments builds that same state when the Trainer first asks for its
# device (src/transformers/training_args.py, `_setup_devices`: `PartialState(...)`).
_TRAINING_ARGUMENTS = frozenset(
    {
        "transformers.TrainingArguments",
        "transformers.training_args.TrainingArguments",
        "transformers.Seq2SeqTrainingArguments",
        "transformers.training_args_seq2seq.Seq2SeqTrainingArguments",
    }
)


def _backend_may_be_nccl(sf: SourceFile, call: ast.Call) -> bool:
    backend = keyword(call, "backend") or (call.args[0] if call.args else None)
    value = sf.names.const_str(backend) if backend is not None else None
    return value is None or value.lower() not in _NOT_NCCL


def _selects_device(sf: SourceFile) -> bool:
    if writes_visible_devices(sf):
        return True
    return any(
        c.name in SELECT_DEVICE
        or (c.name in PROCESS_GROUP and keyword(c.node, "device_id"))
        or (c.name in _ACCELERATE_STATES and not _on_cpu(sf, c.node))
        or (c.name in _TRAINING_ARGUMENTS and not _on_cpu(sf, c.node, ("use_cpu", "no_cuda")))
        for c in call_sites(sf)
    )


def _on_cpu(sf: SourceFile, call: ast.Call, names: tuple[str, ...] = ("cpu",)) -> bool:
    """`Accelerator(cpu=True)`, a value not known, or `**kwargs` that may hold it: no GPU is
    known to be selected."""
    if any(k.arg is None for k in call.keywords):
        return True
    values = [keyword(call, n) for n in names]
    return any(
        v is not None and not (isinstance(v, ast.Constant) and v.value is False) for v in values
    )


def _selects_anywhere(ctx: CheckContext) -> bool:
    """Some file of the run selects a device, through whatever wrapper (`self.set_device()`,
    `get_accelerator().set_device(...)`, `device_id=`): frameworks spread this over modules."""
    cache = ctx.project.cache
    if "selects-anywhere" not in cache:
        cache["selects-anywhere"] = any(
            b"set_device" in f.data or b"device_id=" in f.data for f in ctx.project.files
        )
    return bool(cache["selects-anywhere"])


_DDP = frozenset(
    {
        "torch.nn.parallel.DistributedDataParallel",
        "torch.nn.parallel.distributed.DistributedDataParallel",
    }
)


# A DataLoader that pins memory pins on the current device: its pin thread sets the creating
# process's current device (torch/utils/data/dataloader.py, current_device_index(), and
# _utils/pin_memory.py, _pin_memory_loop), a context on GPU 0 in every rank without set_device.
_DATALOADERS = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})


def _pins(value: ast.expr | None) -> bool:
    return value is not None and not (isinstance(value, ast.Constant) and not value.value)


def _device_known(sf: SourceFile, barrier: CallSite) -> bool:
    """A DDP wrap earlier in the barrier's function with `device_ids=` from a name: its
    constructor's broadcast ran on that GPU, and a NCCL barrier runs on the devices the group's
    collectives used (ProcessGroupNCCL::barrier; `usedDeviceIdxs_`, `guessDeviceId` in
    torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp). The rank % GPU-count guess is for a
    barrier before any collective."""
    for c in call_sites(sf):
        if c.name not in _DDP or c.owners != barrier.owners:
            continue
        if c.node.lineno >= barrier.node.lineno:
            continue
        ids = keyword(c.node, "device_ids")
        if isinstance(ids, (ast.List, ast.Tuple)) and any(
            not isinstance(e, ast.Constant) for e in ids.elts
        ):
            return True
    return False


def _ambiguous_device(sf: SourceFile) -> CallSite | None:
    """A use that means "the current GPU", which is GPU 0 until set_device runs."""
    for c in call_sites(sf):
        call, func = c.node, c.node.func
        if (
            isinstance(func, ast.Attribute)
            and func.attr == "cuda"
            and not call.args
            and not call.keywords
        ):
            return c
        if any(
            sf.names.const_str(v) == "cuda" for v in [*call.args, *(k.value for k in call.keywords)]
        ):
            return c
        if (
            c.name in ("torch.distributed.barrier",)
            and not keyword(call, "device_ids")
            and not _device_known(sf, c)
        ):
            return c
        if c.name in _DATALOADERS and _pins(keyword(call, "pin_memory")):
            return c
    return None


def process_group(ctx: CheckContext, sf: SourceFile) -> None:
    """GPF006 in a module that starts ranks and whose GPU 0 is not each rank's own."""
    groups = [
        c
        for c in call_sites(sf)
        if c.name in PROCESS_GROUP
        and not one_rank_group(c)  # one rank: the current GPU is its own
        and not keyword(c.node, "device_id")
        and _backend_may_be_nccl(sf, c.node)
    ]
    if not groups or _selects_device(sf) or _selects_anywhere(ctx):
        return
    use = _ambiguous_device(sf)
    if use is None or any(_selects_device(n) for n in neighbours(ctx.project, sf)):
        return
    groups = [
        c for c in groups if not (c.owners and pinned_by_callers(ctx.project, sf, c.owners[0]))
    ]
    if not groups:
        return
    if use.name == "torch.distributed.barrier":
        then = (
            f"line {use.node.lineno} then runs a barrier with no collective on the rank's own "
            "GPU before it, so on a GPU NCCL guesses (rank % GPU count) or GPU 0: it hangs "
            "where that is not the rank's GPU"
        )
    elif use.name in _DATALOADERS:
        then = (
            f"line {use.node.lineno} then pins memory in a DataLoader on the current device, "
            "GPU 0 on every rank (a CUDA context there per rank)"
        )
    else:
        then = f"line {use.node.lineno} then uses the current device, GPU 0 on every rank"
    ctx.reporter.add(
        "GPF006",
        sf,
        groups[0].node,
        f"process group started but no rank selects its GPU (no torch.cuda.set_device, no "
        f"device_id=): {then}; call torch.cuda.set_device(local_rank) before init_process_group",
    )
