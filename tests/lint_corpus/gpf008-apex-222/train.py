# source: https://github.com/NVIDIA/apex/issues/222
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import argparse

import torch
import torch.distributed as dist
from apex.parallel import DistributedDataParallel as DDP

ap = argparse.ArgumentParser()
ap.add_argument("--local_rank", type=int, default=0)
ap.add_argument("--weights", default="pretrained.pth")
args = ap.parse_args()

torch.cuda.set_device(args.local_rank)
dist.init_process_group(backend="nccl", init_method="env://")
model = torch.nn.Linear(16, 16).cuda()
model.load_state_dict(torch.load(args.weights))  # expect: GPF008
model = DDP(model)
