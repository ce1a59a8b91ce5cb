# source: https://github.com/modelscope/ms-swift/pull/41
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import os
from typing import Optional, Tuple

import torch
import torch.distributed as dist


def get_dist_setting() -> Tuple[int, int, int, int]:
    """rank, local_rank, world_size, local_world_size from the launcher's environment"""
    rank = int(os.getenv("RANK", -1))
    local_rank = int(os.getenv("LOCAL_RANK", -1))
    world_size = int(os.getenv("WORLD_SIZE", 1))
    local_world_size = int(os.getenv("LOCAL_WORLD_SIZE", 1))
    return rank, local_rank, world_size, local_world_size


def is_master() -> bool:
    return get_dist_setting()[0] in {-1, 0}


def is_dist() -> bool:
    rank, local_rank, _, _ = get_dist_setting()
    return rank >= 0 and local_rank >= 0


def broadcast_string(string: Optional[str], buffer_size: int = 100) -> str:
    """send rank 0's string to every rank"""
    assert dist.is_initialized()
    rank, local_rank, _, _ = get_dist_setting()
    if rank == 0:
        codes = [ord(c) for c in string] + [0] * (buffer_size - len(string))
        tensor = torch.tensor(codes, dtype=torch.int64, device=local_rank)
    else:
        tensor = torch.zeros(buffer_size, dtype=torch.int64, device=local_rank)
    dist.broadcast(tensor, 0)
    end = (tensor == 0).nonzero()[0].item()
    return "".join(chr(x) for x in tensor.tolist()[:end])
