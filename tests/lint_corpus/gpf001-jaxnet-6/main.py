# source: https://github.com/juliuskunze/jaxnet/issues/6
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import os

import jaxnet

os.environ["CUDA_VISIBLE_DEVICES"] = "2"  # expect: GPF001
