# source: https://github.com/ultralytics/yolov5/issues/8395
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import argparse

import torch

from utils.torch_utils import select_device

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="7")
    opt = ap.parse_args()
    device = select_device(opt.device, batch_size=16)
    x = torch.zeros(1, device=device)
