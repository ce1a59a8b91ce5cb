# source: https://github.com/pytorch/pytorch/issues/9158
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import os
import torch
import torch.nn as nn

os.environ["CUDA_VISIBLE_DEVICES"] = "2"  # expect: GPF001

model = nn.Linear(10, 2).cuda()
print(torch.cuda.current_device())
