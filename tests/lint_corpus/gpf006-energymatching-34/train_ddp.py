# source: https://github.com/m1balcerak/EnergyMatching/pull/34
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import os

import torch
import torch.distributed as dist


def setup():
    dist.init_process_group(backend="nccl")  # expect: GPF006
    world = int(os.environ["WORLD_SIZE"])
    return world


def main():
    world = setup()
    model = torch.nn.Linear(2, 2).cuda()
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    print(world, ddp)


if __name__ == "__main__":
    main()
