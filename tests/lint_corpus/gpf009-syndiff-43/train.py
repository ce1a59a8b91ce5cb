# source: https://github.com/icon-lab/SynDiff/issues/43
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import argparse

import torch


def train(rank, gpu, args):
    torch.autograd.set_detect_anomaly(True)  # expect: GPF009
    device = torch.device("cuda:{}".format(gpu))
    model = torch.nn.Conv2d(1, 1, 3).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    for _ in range(args.num_epoch):
        loss = model(torch.randn(1, 1, 32, 32, device=device)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--num_epoch", type=int, default=1)
    train(0, 0, ap.parse_args())
