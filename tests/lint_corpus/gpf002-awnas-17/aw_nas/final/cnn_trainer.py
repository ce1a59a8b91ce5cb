# source: https://github.com/walkerning/aw_nas/pull/17
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import torch

from aw_nas.utils import DataParallel


class CNNFinalTrainer:
    def __init__(self, model, device, gpus):
        self.model = model
        self.device = device
        self.gpus = gpus
        self.parallel_model = model

    def _parallelize(self):
        if len(self.gpus) >= 2:
            model = DataParallel(self.model, self.gpus)  # expect: GPF002
            self.parallel_model = model.to(self.device)

    def train(self, train_queue, criterion):
        self._parallelize()
        optimizer = torch.optim.SGD(self.parallel_model.parameters(), lr=0.05)
        self.parallel_model.train()
        for inputs, targets in train_queue:
            logits = self.parallel_model(inputs.to(self.device))
            loss = criterion(logits, targets.to(self.device))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
