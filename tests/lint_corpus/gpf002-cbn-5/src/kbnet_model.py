# source: https://github.com/alexklwong/calibrated-backprojection-network/issues/5
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import torch


class KBNetModel:
    def __init__(self, network, device=torch.device("cuda")):
        self.network = network.to(device)

    def data_parallel(self):
        self.network = torch.nn.DataParallel(self.network)  # expect: GPF002

    def train_step(self, batch, optimizer):
        loss = self.network(batch).abs().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
