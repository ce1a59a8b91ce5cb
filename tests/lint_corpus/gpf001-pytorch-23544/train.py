# source: https://github.com/pytorch/pytorch/issues/23544
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import os

import torch

cudaIndex = "1"  # the GPU the reporter chose; the thread does not say which
use_cuda = torch.cuda.is_available()
os.environ["CUDA_VISIBLE_DEVICES"] = cudaIndex  # expect: GPF001
