# source: https://github.com/facebookresearch/mmf/pull/434
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import torch


class BaseTrainer:
    def __init__(self, config):
        self.config = config

    def load(self):
        torch.autograd.set_detect_anomaly(True)  # expect: GPF009
        self.model = torch.nn.Linear(4, 4).cuda()
