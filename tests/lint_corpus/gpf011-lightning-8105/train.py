# source: https://github.com/Lightning-AI/pytorch-lightning/issues/8105
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import torch
from pytorch_lightning import LightningModule, Trainer
from torch.utils.data import DataLoader, TensorDataset


class PairClassifier(LightningModule):
    def __init__(self):
        super().__init__()
        self.head = torch.nn.Linear(16, 2)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return {"logits": self.head(x), "labels": y}

    def training_step_end(self, outputs):
        # the reporter expected a list with one entry per GPU here
        print(outputs)
        return torch.nn.functional.cross_entropy(outputs["logits"], outputs["labels"])

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3)


data = TensorDataset(torch.randn(400, 16), torch.randint(0, 2, (400,)))
model = PairClassifier()
trainer = Trainer(gpus=4, accelerator="dp", max_epochs=10)  # expect: GPF011
trainer.fit(model, DataLoader(data, batch_size=40))
