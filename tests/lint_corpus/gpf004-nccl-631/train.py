# source: https://github.com/NVIDIA/nccl/issues/631
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import os

os.environ["NCCL_P2P_DISABLE"] = "1"  # expect: GPF004

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    t = torch.ones(1, device="cuda")
    dist.all_reduce(t)


if __name__ == "__main__":
    main()
