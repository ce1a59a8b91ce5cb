# source: https://github.com/rosinality/stylegan2-pytorch/issues/36
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import argparse
import os

import torch
from torch import nn, optim

from distributed import synchronize
from model import Discriminator, Generator

if __name__ == "__main__":
    device = "cuda"

    parser = argparse.ArgumentParser()
    parser.add_argument("--ckpt", type=str, default=None)
    parser.add_argument("--local_rank", type=int, default=0)
    args = parser.parse_args()

    n_gpu = int(os.environ["WORLD_SIZE"]) if "WORLD_SIZE" in os.environ else 1
    args.distributed = n_gpu > 1

    if args.distributed:
        torch.cuda.set_device(args.local_rank)
        torch.distributed.init_process_group(backend="nccl", init_method="env://")
        synchronize()

    generator = Generator(256, 512, 8).to(device)
    discriminator = Discriminator(256).to(device)
    g_optim = optim.Adam(generator.parameters(), lr=0.002)
    d_optim = optim.Adam(discriminator.parameters(), lr=0.002)

    if args.ckpt is not None:
        ckpt = torch.load(args.ckpt)  # expect: GPF008
        generator.load_state_dict(ckpt["g"])
        discriminator.load_state_dict(ckpt["d"])
        g_optim.load_state_dict(ckpt["g_optim"])
        d_optim.load_state_dict(ckpt["d_optim"])

    if args.distributed:
        generator = nn.parallel.DistributedDataParallel(
            generator, device_ids=[args.local_rank], output_device=args.local_rank
        )
        discriminator = nn.parallel.DistributedDataParallel(
            discriminator, device_ids=[args.local_rank], output_device=args.local_rank
        )
