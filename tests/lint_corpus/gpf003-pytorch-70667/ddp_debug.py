# source: https://github.com/pytorch/pytorch/issues/70667
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank):
    dist.init_process_group("nccl", rank=rank, world_size=2)
    torch.cuda.set_device(rank)
    model = torch.nn.Linear(10, 10).cuda()
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[rank])
    ddp(torch.randn(4, 10).cuda()).sum().backward()


if __name__ == "__main__":
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ["MASTER_PORT"] = "29501"
    os.environ["TORCH_DISTRIBUTED_DEBUG"] = "DETAIL"  # expect: GPF003
    mp.spawn(worker, nprocs=2, args=())
