# source: https://github.com/WongKinYiu/yolov7/pull/2146
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import argparse

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from utils.loss import ComputeLossOTA


def train(opt, model, loader, device):
    if opt.local_rank != -1:
        model = DDP(model, device_ids=[opt.local_rank], output_device=opt.local_rank)
    compute_loss_ota = ComputeLossOTA(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    model.train()
    for imgs, targets in loader:
        pred = model(imgs.to(device))
        loss = compute_loss_ota(pred, targets.to(device), imgs)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--local_rank", type=int, default=-1)
    opt = parser.parse_args()
    device = torch.device("cuda")
    if opt.local_rank != -1:
        torch.cuda.set_device(opt.local_rank)
        device = torch.device("cuda", opt.local_rank)
        dist.init_process_group(backend="nccl", init_method="env://")
    model = torch.nn.Conv2d(3, 8, 3).to(device)
    train(opt, model, [], device)
