# source: https://github.com/FabianPlum/SMILify/pull/82
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
SHAPE_FAMILY = -1
GPU_IDS = "0"  # which GPU to run on
