# source: https://github.com/pytorch-tpu/llama/pull/21
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import os
import sys
from typing import Tuple

import fire
import torch
import torch.distributed as dist
import torch.multiprocessing as xmp

from example_xla import load
from llama.xla_model_parallel import set_g_group


def setup_model_parallel(rank, world_size) -> Tuple[int, int]:
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = "12356"

    # initialize the process group
    dist.init_process_group("nccl", rank=rank, world_size=world_size)  # expect: GPF006
    set_g_group()

    # seed must be the same in all processes
    torch.manual_seed(1)


def main(
    rank: int,
    world_size: int,
    tokenizer_path: str,
    max_seq_len: int = 512,
    max_batch_size: int = 32,
    ckpt_dir: str = "",
):
    setup_model_parallel(rank, world_size)
    if rank > 0:
        sys.stdout = open(os.devnull, "w")

    generator = load(
        ckpt_dir,
        tokenizer_path,
        rank,
        world_size,
        max_seq_len,
        max_batch_size,
        torch.device("cuda", rank),
    )
    with torch.no_grad():
        results = generator.generate(
            ["I believe the meaning of life is"], 256, torch.device("cuda", rank)
        )
    for result in results:
        print(result)


def _fn(
    rank: int,
    world_size: int,
    tokenizer_path: str,
    max_seq_len: int = 512,
    max_batch_size: int = 32,
    ckpt_dir: str = "",
):
    main(rank, world_size, tokenizer_path, max_seq_len, max_batch_size, ckpt_dir)


def mp_main(
    mp: bool,
    tokenizer_path: str,
    max_seq_len: int = 512,
    max_batch_size: int = 32,
    ckpt_dir: str = "",
):
    world_size = 1
    assert torch.cuda.is_available(), "cuda is not available"
    if mp:
        world_size = torch.cuda.device_count()
        xmp.spawn(
            _fn,
            args=(world_size, tokenizer_path, max_seq_len, max_batch_size, ckpt_dir),
            nprocs=world_size,
            join=True,
        )
    else:
        main(0, world_size, tokenizer_path, max_seq_len, max_batch_size, ckpt_dir)


if __name__ == "__main__":
    fire.Fire(mp_main)
