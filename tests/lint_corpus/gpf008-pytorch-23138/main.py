# source: https://github.com/pytorch/pytorch/issues/23138
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import argparse

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def main_worker(gpu, ngpus, args):
    dist.init_process_group(backend="nccl", init_method=args.dist_url, world_size=ngpus, rank=gpu)
    torch.cuda.set_device(gpu)
    model = torch.nn.Linear(10, 10).cuda(gpu)
    model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[gpu])
    if args.resume:
        checkpoint = torch.load(args.resume)  # expect: GPF008
        model.load_state_dict(checkpoint["state_dict"])


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--resume", default="")
    ap.add_argument("--dist-url", default="tcp://127.0.0.1:23456")
    args = ap.parse_args()
    n = torch.cuda.device_count()
    mp.spawn(main_worker, nprocs=n, args=(n, args))
