# source: https://github.com/ultralytics/yolov5/pull/13682
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import os

import torch


def select_device(device=""):
    device = str(device).lower()
    if device in ("cpu", "mps"):
        os.environ["CUDA_VISIBLE_DEVICES"] = "-1"  # expect: GPF001
        return torch.device(device)
    return torch.device("cuda:0")
