# source: https://github.com/deepspeedai/DeepSpeed/pull/7266
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import torch.distributed as dist


def init_distributed(dist_backend="nccl", timeout=None):
    if not dist.is_initialized():
        dist.init_process_group(backend=dist_backend)  # expect: GPF006
    dist.barrier()
