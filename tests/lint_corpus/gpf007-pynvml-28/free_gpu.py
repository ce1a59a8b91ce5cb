# source: https://github.com/gpuopenanalytics/pynvml/issues/28
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import os

import pynvml


def pick_free_gpu():
    pynvml.nvmlInit()
    best, best_free = 0, -1
    for i in range(pynvml.nvmlDeviceGetCount()):
        handle = pynvml.nvmlDeviceGetHandleByIndex(i)
        free = pynvml.nvmlDeviceGetMemoryInfo(handle).free
        if free > best_free:
            best, best_free = i, free
    os.environ["CUDA_VISIBLE_DEVICES"] = str(best)  # expect: GPF007
    return best
