# source: https://github.com/cupy/cupy/issues/9094
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import os

import cupy as cp

max_available_gpus = cp.cuda.runtime.getDeviceCount()
os.environ["CUDA_VISIBLE_DEVICES"] = "3,2"  # expect: GPF001

with cp.cuda.Device(0):
    a = cp.arange(10)
    print(a.sum(), max_available_gpus)
