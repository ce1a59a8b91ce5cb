# source: https://github.com/facebookresearch/mmf/issues/190
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import torch


class Trainer:
    def __init__(self, model, config):
        self.model = model
        self.config = config

    def load_model(self):
        self.model = self.model.to("cuda")
        if torch.cuda.device_count() > 1:
            self.model = torch.nn.DataParallel(self.model)  # expect: GPF002

    def train(self, batches):
        self.model.train()
        opt = torch.optim.Adamax(self.model.parameters())
        for batch in batches:
            loss = self.model(batch).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
