# source: https://github.com/NVIDIA-Merlin/Merlin/issues/375
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import os

import nvtabular as nvt
import torch
import torch.distributed as dist
from nvtabular.loader.torch import DLDataLoader, TorchAsyncItr

os.environ["CUDA_VISIBLE_DEVICES"] = os.environ["LOCAL_RANK"]  # expect: GPF001
rank = int(os.environ["LOCAL_RANK"])
device = torch.device(f"cuda:{rank}")
dist.init_process_group(backend="nccl")
torch.cuda.set_device(device)
rank = dist.get_rank()
world_size = dist.get_world_size()
dataset = TorchAsyncItr(
    nvt.Dataset(["day_0.parquet"], engine="parquet"),
    batch_size=4096,
    cats=["C1"],
    conts=["I1"],
    labels=["label"],
    device=rank,
    global_size=world_size,
    global_rank=rank,
    shuffle=True,
)
train_loader = DLDataLoader(dataset, batch_size=None, pin_memory=False, num_workers=0)
