# source: https://github.com/dbolya/yolact/issues/438
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import argparse

import torch
import torch.nn as nn
import torch.optim as optim
import torch.utils.data as data

from data import *
from layers.modules import MultiBoxLoss
from yolact import Yolact

parser = argparse.ArgumentParser(description="Yolact Training Script")
parser.add_argument("--batch_size", default=8, type=int)
parser.add_argument("--lr", default=1e-3, type=float)
parser.add_argument("--momentum", default=0.9, type=float)
parser.add_argument("--batch_alloc", default=None, type=str)
parser.add_argument("--cuda", default=True, type=bool)
args = parser.parse_args()

if torch.cuda.device_count() == 0:
    print("No GPUs detected. Exiting...")
    exit(-1)


class NetLoss(nn.Module):
    """Computes the loss inside forward so that DataParallel can spread it."""

    def __init__(self, net, criterion):
        super().__init__()
        self.net = net
        self.criterion = criterion

    def forward(self, images, targets, masks, num_crowds):
        preds = self.net(images)
        return self.criterion(self.net, preds, targets, masks, num_crowds)


class CustomDataParallel(nn.DataParallel):
    """A DataParallel that splits our list-shaped batches itself."""

    def scatter(self, inputs, kwargs, device_ids):
        devices = ["cuda:" + str(x) for x in device_ids]
        splits = prepare_data(inputs[0], devices, allocation=args.batch_alloc)
        return [[split[device_idx] for split in splits] for device_idx in range(len(devices))], [
            kwargs
        ] * len(devices)

    def gather(self, outputs, output_device):
        out = {}
        for k in outputs[0]:
            out[k] = torch.stack([output[k].to(output_device) for output in outputs])
        return out


def prepare_data(datum, devices, allocation=None):
    images, (targets, masks, num_crowds) = datum
    per_device = len(images) // len(devices)
    return [
        [x[i * per_device : (i + 1) * per_device] for i in range(len(devices))]
        for x in (images, targets, masks, num_crowds)
    ]


def train():
    dataset = COCODetection(image_path=cfg.dataset.train_images, info_file=cfg.dataset.train_info)
    yolact_net = Yolact()
    net = yolact_net
    net.train()
    optimizer = optim.SGD(net.parameters(), lr=args.lr, momentum=args.momentum)
    criterion = MultiBoxLoss(num_classes=cfg.num_classes, pos_threshold=cfg.positive_iou_threshold)

    net = CustomDataParallel(NetLoss(net, criterion))  # expect: GPF002
    if args.cuda:
        net = net.cuda()

    data_loader = data.DataLoader(
        dataset, args.batch_size, shuffle=True, collate_fn=detection_collate
    )
    for datum in data_loader:
        optimizer.zero_grad()
        losses = net(datum)
        loss = sum(losses[k].mean() for k in losses)
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    train()
