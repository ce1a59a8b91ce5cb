# source: https://github.com/ultralytics/yolov5/issues/6431
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
