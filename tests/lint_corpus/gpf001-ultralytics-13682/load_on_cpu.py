# source: https://github.com/ultralytics/yolov5/pull/13682
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
from torch_utils import select_device

select_device("cpu")
