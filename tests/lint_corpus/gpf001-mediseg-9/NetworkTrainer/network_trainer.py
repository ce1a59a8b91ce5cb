# source: https://github.com/hust-linyi/MedISeg/issues/9
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import torch


class NetworkTrainer:
    def __init__(self, opt):
        self.opt = opt
        self.device = torch.device("cuda")
