# source: https://github.com/Lightning-AI/pytorch-lightning/issues/17737
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import argparse
import os

import lightning
import torch


class TinyNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(1000, 10)

    def forward(self, x):
        return self.linear(x)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--devices", default=2)
    parser.add_argument("--use-torch-load", action="store_true")
    args = parser.parse_args()

    fabric = lightning.Fabric(accelerator="gpu", devices=args.devices, strategy="ddp")
    fabric.launch()

    net = TinyNet()
    net, optimizer = fabric.setup(net, torch.optim.Adam(net.parameters()))

    if os.path.exists("net.ckpt"):
        if args.use_torch_load:
            state = torch.load("net.ckpt")  # expect: GPF008
        else:
            state = fabric.load("net.ckpt")
        net.load_state_dict(state["net"])
    else:
        if fabric.is_global_zero:
            fabric.save("net.ckpt", {"net": net.state_dict()})


if __name__ == "__main__":
    main()
