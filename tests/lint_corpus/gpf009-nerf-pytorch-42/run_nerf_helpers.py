# source: https://github.com/yenchenlin/nerf-pytorch/issues/42
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import torch

torch.autograd.set_detect_anomaly(True)  # expect: GPF009
import torch.nn as nn

img2mse = lambda x, y: torch.mean((x - y) ** 2)


class NeRF(nn.Module):
    def __init__(self, D=8, W=256):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(W, W) for _ in range(D)])
