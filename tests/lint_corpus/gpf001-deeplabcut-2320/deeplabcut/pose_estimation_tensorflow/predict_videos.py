# source: https://github.com/DeepLabCut/DeepLabCut/pull/2320
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import argparse
import os
import os.path
import pickle
import time
from pathlib import Path

import cv2
import numpy as np
import pandas as pd
import tensorflow as tf

from deeplabcut.pose_estimation_tensorflow.config import load_config
from deeplabcut.pose_estimation_tensorflow.core import predict
from deeplabcut.utils import auxiliaryfunctions


def analyze_videos(config, videos, shuffle=1, trainingsetindex=0, gputouse=None, save_as_csv=False):
    if "TF_CUDNN_USE_AUTOTUNE" in os.environ:
        del os.environ["TF_CUDNN_USE_AUTOTUNE"]  # was potentially set during training

    if gputouse is not None:  # gpu selection
        os.environ["CUDA_VISIBLE_DEVICES"] = str(gputouse)  # expect: GPF001

    tf.compat.v1.reset_default_graph()
    start_path = os.getcwd()
    cfg = auxiliaryfunctions.read_config(config)
    trainFraction = cfg["TrainingFraction"][trainingsetindex]
    sess, inputs, outputs = predict.setup_pose_prediction(load_config(cfg["pose_config"]))
    os.chdir(str(start_path))
    return sess, inputs, outputs, trainFraction


def analyze_time_lapse_frames(
    config, directory, frametype=".png", shuffle=1, trainingsetindex=0, gputouse=None
):
    if "TF_CUDNN_USE_AUTOTUNE" in os.environ:
        del os.environ["TF_CUDNN_USE_AUTOTUNE"]  # was potentially set during training

    if gputouse is not None:  # gpu selection
        os.environ["CUDA_VISIBLE_DEVICES"] = str(gputouse)  # expect: GPF001

    tf.compat.v1.reset_default_graph()
    cfg = auxiliaryfunctions.read_config(config)
    frames = sorted(Path(directory).glob("*" + frametype))
    return [cv2.imread(str(f)) for f in frames], cfg
