# source: https://github.com/yiqiao-yin/deepspeed-course/pull/17
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import os

import deepspeed
import torch
import torch.distributed as dist


def prepare_data(rank):
    if rank == 0:
        print("downloading CIFAR-10")
    dist.barrier()


def main():
    deepspeed.init_distributed()  # expect: GPF006
    rank = dist.get_rank()
    prepare_data(rank)
    model = torch.nn.Linear(32, 10)
    engine, _, _, _ = deepspeed.initialize(
        model=model, model_parameters=model.parameters(), config="ds.json"
    )
    print(os.environ.get("LOCAL_RANK"), engine.device)


if __name__ == "__main__":
    main()
