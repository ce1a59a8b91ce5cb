# source: https://github.com/ultralytics/yolov5/issues/8395
