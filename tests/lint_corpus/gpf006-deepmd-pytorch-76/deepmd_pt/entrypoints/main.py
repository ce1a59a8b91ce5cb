# source: https://github.com/dptech-corp/deepmd-pytorch/pull/76
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import os

import torch
import torch.distributed as dist


def train():
    if os.environ.get("LOCAL_RANK") is not None:
        dist.init_process_group(backend="nccl")  # expect: GPF006
    device = torch.device("cuda")
    model = torch.nn.Linear(3, 3).to(device)
    model = torch.nn.parallel.DistributedDataParallel(model)
    model(torch.randn(2, 3, device=device)).sum().backward()
