# source: https://github.com/huggingface/pytorch-image-models/issues/72
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import argparse
import os

import torch
import torch.nn as nn

from timm.models import create_model, resume_checkpoint
from timm.utils import *


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--resume", default="", type=str)
    parser.add_argument("--model-ema", action="store_true", default=False)
    parser.add_argument("--local_rank", default=0, type=int)
    args = parser.parse_args()

    args.distributed = False
    if "WORLD_SIZE" in os.environ:
        args.distributed = int(os.environ["WORLD_SIZE"]) > 1

    if args.distributed:
        torch.cuda.set_device(args.local_rank)
        torch.distributed.init_process_group(backend="nccl", init_method="env://")

    model = create_model("efficientnet_b0")
    model.cuda()

    if args.resume:
        resume_checkpoint(model, args.resume)

    model_ema = None
    if args.model_ema:
        model_ema = ModelEma(model, decay=0.9998, device="", resume=args.resume)

    if args.distributed:
        model = nn.parallel.DistributedDataParallel(model, device_ids=[args.local_rank])


if __name__ == "__main__":
    main()
