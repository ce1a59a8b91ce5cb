# source: https://github.com/ultralytics/yolov5/issues/6431
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import argparse

from utils.torch_utils import select_device


def main(opt):
    device = select_device(opt.device)
    print(device)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="")
    main(parser.parse_args())
