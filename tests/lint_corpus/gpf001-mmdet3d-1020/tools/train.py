# source: https://github.com/open-mmlab/mmdetection3d/issues/1020
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import argparse
import os

import mmcv
from mmcv import Config

os.environ["CUDA_VISIBLE_DEVICES"] = "1"  # expect: GPF001


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    cfg = Config.fromfile(ap.parse_args().config)
    print(mmcv.__version__, cfg)


if __name__ == "__main__":
    main()
