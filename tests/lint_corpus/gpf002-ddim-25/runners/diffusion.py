# source: https://github.com/ermongroup/ddim/issues/25
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import torch


class Diffusion:
    def __init__(self, config, device=None):
        self.config = config
        self.device = device or torch.device("cuda")

    def train(self, model, loader):
        model = model.to(self.device)
        model = torch.nn.DataParallel(model)  # expect: GPF002
        optimizer = torch.optim.Adam(model.parameters(), lr=2e-4)
        for x in loader:
            loss = model(x.to(self.device)).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
