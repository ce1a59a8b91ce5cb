# source: https://github.com/JDAI-CV/fast-reid/issues/130
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import torch
from torch.nn import DataParallel


class DefaultTrainer:
    def __init__(self, model, optimizer, loader):
        if torch.cuda.device_count() > 1:
            model = DataParallel(model)  # expect: GPF002
        self.model = model.cuda()
        self.optimizer = optimizer
        self.loader = loader

    def run_step(self):
        self.model.train()
        data = next(iter(self.loader))
        loss = self.model(data).sum()
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
