# source: https://github.com/pytorch/pytorch/issues/80876
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import os

import torch

os.environ["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"  # expect: GPF001
os.environ["CUDA_VISIBLE_DEVICES"] = "1"  # expect: GPF001

for i in range(torch.cuda.device_count()):
    info = torch.cuda.get_device_properties(i)
    print(f"CUDA:{i} {info.name}")
device = torch.device("cuda:0")
