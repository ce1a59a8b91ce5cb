# source: https://github.com/ultralytics/yolov5/pull/13682
from torch_utils import select_device

select_device("cpu")
