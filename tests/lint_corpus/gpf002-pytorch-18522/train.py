# source: https://github.com/pytorch/pytorch/issues/18522
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import torch
import torch.nn as nn


class MetaNet(nn.Module):
    """Keeps its weights as buffers instead of Parameters, as the report describes."""

    def __init__(self):
        super().__init__()
        self.register_buffer("weight", torch.randn(32, 32, requires_grad=True))

    def forward(self, x):
        return x @ self.weight


def main(loader):
    model = nn.DataParallel(MetaNet(), device_ids=[0, 1, 2, 3]).cuda()  # expect: GPF002
    model.train()
    for x in loader:
        loss = model(x.cuda()).pow(2).mean()
        loss.backward()


if __name__ == "__main__":
    main([])
