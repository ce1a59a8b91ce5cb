# source: https://github.com/Project-MONAI/MONAI/issues/2167
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import monai

monai.config.deviceconfig.set_visible_devices(0)
import torch

a = torch.rand((1), device="cuda:1")
print(a.device)
