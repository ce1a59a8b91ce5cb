# source: https://discuss.pytorch.org/t/cuda-launch-blocking-1-reduces-the-training-speed/160924
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import os

os.environ["CUDA_LAUNCH_BLOCKING"] = "1"  # expect: GPF003

import torch

model = torch.nn.Linear(512, 512).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(100):
    loss = model(torch.randn(256, 512, device="cuda")).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
