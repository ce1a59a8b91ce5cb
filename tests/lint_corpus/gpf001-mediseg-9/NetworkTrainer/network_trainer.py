# source: https://github.com/hust-linyi/MedISeg/issues/9
import torch


class NetworkTrainer:
    def __init__(self, opt):
        self.opt = opt
        self.device = torch.device("cuda")
