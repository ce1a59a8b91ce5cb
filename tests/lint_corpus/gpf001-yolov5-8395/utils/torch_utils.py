# source: https://github.com/ultralytics/yolov5/issues/8395
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import os
import platform

import torch


def select_device(device="", batch_size=0):
    s = f"torch-{torch.__version__} "
    device = str(device).strip().lower().replace("cuda:", "")
    if device and device != "cpu":
        os.environ["CUDA_VISIBLE_DEVICES"] = device  # expect: GPF001
        n = len(device.split(","))
        assert torch.cuda.device_count() >= n
    print(s + platform.python_version())
    return torch.device("cuda:0" if device != "cpu" else "cpu")
