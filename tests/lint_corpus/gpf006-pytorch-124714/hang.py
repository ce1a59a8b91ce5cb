# source: https://github.com/pytorch/pytorch/issues/124714
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import torch
import torch.distributed as dist

dist.init_process_group(backend="nccl")  # expect: GPF006
dist.barrier()
x = torch.ones(1).cuda()
dist.all_reduce(x)
