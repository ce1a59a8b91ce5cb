# source: https://github.com/princeton-vl/RAFT/issues/33
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import argparse

import torch
import torch.nn as nn
import torch.optim as optim


class RAFT(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.net = nn.Conv2d(6, 2, 3, padding=1)

    def forward(self, a, b):
        return self.net(torch.cat([a, b], 1))


def train(args):
    model = nn.DataParallel(RAFT(args), device_ids=args.gpus)  # expect: GPF002
    model.cuda()
    model.train()
    optimizer = optim.AdamW(model.parameters(), lr=args.lr)
    for _ in range(args.num_steps):
        a = torch.randn(args.batch_size, 3, 64, 64).cuda()
        loss = model(a, a).abs().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--gpus", type=int, nargs="+", default=[0, 1])
    p.add_argument("--lr", type=float, default=4e-4)
    p.add_argument("--batch_size", type=int, default=6)
    p.add_argument("--num_steps", type=int, default=100)
    train(p.parse_args())
