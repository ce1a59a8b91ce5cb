# source: https://github.com/FoundationVision/Infinity/pull/76
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import os

import torch
import torch.distributed as tdist


def initialize(backend="nccl"):
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    tdist.init_process_group(backend=backend)  # expect: GPF006
    tdist.barrier()
    return local_rank


def allreduce(t):
    t = t.cuda()
    tdist.all_reduce(t)
    return t
