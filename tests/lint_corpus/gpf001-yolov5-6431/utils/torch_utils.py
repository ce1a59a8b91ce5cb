# source: https://github.com/ultralytics/yolov5/issues/6431
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import os

import torch


def select_device(device=""):
    cpu = device == "cpu"
    if cpu:
        os.environ["CUDA_VISIBLE_DEVICES"] = "-1"  # expect: GPF001
    elif device:
        os.environ["CUDA_VISIBLE_DEVICES"] = device  # expect: GPF001
        assert torch.cuda.is_available()
    return torch.device("cuda:0" if not cpu else "cpu")
