# source: https://github.com/stanford-iprl-lab/nerf_shared/issues/10
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import torch

torch.autograd.set_detect_anomaly(True)  # expect: GPF009


def to8b(x):
    return (255 * torch.clamp(x, 0, 1)).to(torch.uint8)
