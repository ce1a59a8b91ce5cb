# source: https://github.com/mapillary/inplace_abn/issues/83
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import torch
import torch.nn as nn


def build(num_classes):
    return nn.Sequential(nn.Conv2d(3, 64, 3), nn.BatchNorm2d(64), nn.Conv2d(64, num_classes, 1))


def main():
    net = build(19).cuda()
    net = nn.DataParallel(net)  # expect: GPF002
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    for _ in range(10):
        x = torch.randn(8, 3, 128, 128).cuda()
        loss = net(x).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


if __name__ == "__main__":
    main()
