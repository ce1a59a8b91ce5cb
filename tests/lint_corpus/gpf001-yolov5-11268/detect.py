# source: https://github.com/ultralytics/yolov5/issues/11268
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import os

from models.common import DetectMultiBackend


def select_device(device):
    os.environ["CUDA_VISIBLE_DEVICES"] = device  # expect: GPF001
    return "cuda:0"


detection_device = select_device("1")
det_model = DetectMultiBackend("yolov5x_1280.pt", detection_device)
