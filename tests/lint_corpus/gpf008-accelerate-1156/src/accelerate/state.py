# source: https://github.com/huggingface/accelerate/pull/1156
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import os
from enum import Enum

import torch


class DistributedType(str, Enum):
    NO = "NO"
    MULTI_GPU = "MULTI_GPU"


class PartialState:
    def __init__(self, cpu: bool = False, **kwargs):
        if int(os.environ.get("LOCAL_RANK", -1)) != -1 and not cpu:
            self.distributed_type = DistributedType.MULTI_GPU
            if not torch.distributed.is_initialized():
                torch.distributed.init_process_group(backend="nccl", **kwargs)
            self.num_processes = torch.distributed.get_world_size()
            self.process_index = torch.distributed.get_rank()
            self.local_process_index = int(os.environ.get("LOCAL_RANK", -1))
            self.device = torch.device("cuda", self.local_process_index)
            torch.cuda.set_device(self.device)
        else:
            self.distributed_type = DistributedType.NO
            self.num_processes = 1
            self.process_index = self.local_process_index = 0
            self.device = torch.device("cuda" if torch.cuda.is_available() and not cpu else "cpu")
