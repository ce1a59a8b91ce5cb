# source: https://github.com/hust-linyi/MedISeg/issues/9
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import os

from network_trainer import NetworkTrainer


def set_GPU_device(opt):
    os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(str(x) for x in opt.gpus)  # expect: GPF001


class Opt:
    gpus = [2, 3]


if __name__ == "__main__":
    opt = Opt()
    set_GPU_device(opt)
    trainer = NetworkTrainer(opt)
