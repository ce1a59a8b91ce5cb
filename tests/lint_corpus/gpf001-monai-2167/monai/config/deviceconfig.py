# source: https://github.com/Project-MONAI/MONAI/issues/2167
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import os
import sys

import numpy as np
import torch


def print_config(file=sys.stdout):
    print(f"Numpy version: {np.version.full_version}", file=file)
    print(f"Pytorch version: {torch.__version__}", file=file)


def set_visible_devices(*dev_inds):
    os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in dev_inds)  # expect: GPF001
