# source: https://github.com/pytorch/pytorch/issues/98763
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import os

import torch
import torch.distributed as dist


def setup(rank, world_size):
    # initialize the process group
    dist.init_process_group("nccl", rank=rank, world_size=world_size)  # expect: GPF006


def rank():
    return int(os.environ.get("RANK") or 0)


def issue_basic(world_size):
    setup(rank(), world_size)
    if rank() == 0:
        print("Master!")
    dist.barrier()


issue_basic(2)
