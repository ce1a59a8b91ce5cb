# source: https://github.com/anderskm/gputil/issues/18
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import os

import GPUtil

DEVICE_ID_LIST = GPUtil.getFirstAvailable(order="memory")
DEVICE_ID = DEVICE_ID_LIST[0]
os.environ["CUDA_VISIBLE_DEVICES"] = str(DEVICE_ID)  # expect: GPF007

import tensorflow as tf

print(tf.config.list_physical_devices("GPU"))
