# source: https://github.com/ultralytics/yolov5/issues/11268
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import torch
import torch.nn as nn


class DetectMultiBackend(nn.Module):
    def __init__(self, weights, device):
        super().__init__()
        self.model = torch.load(weights, map_location=device)
