# source: https://github.com/ultralytics/yolov5/issues/11268
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
