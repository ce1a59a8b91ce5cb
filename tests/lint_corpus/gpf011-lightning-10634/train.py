# source: https://github.com/Lightning-AI/pytorch-lightning/issues/10634
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import pytorch_lightning as pl
import torch


class Segmenter(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Conv2d(3, 2, 1)

    def forward(self, batch):
        pred = self.net(batch["image"])
        loss = torch.nn.functional.cross_entropy(pred, batch["label"])
        return loss, pred

    def training_step(self, batch, batch_idx):
        loss, _ = self(batch)
        return loss

    def validation_step(self, batch, batch_idx):
        loss, pred = self(batch)
        return {"loss": loss, "pred": pred, "label": batch["label"]}

    def validation_step_end(self, output):
        # expected one entry per GPU for every key; "pred" and "label" came back merged wrongly
        return output

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def main(datamodule):
    trainer = pl.Trainer(gpus=4, strategy="dp", max_epochs=20)  # expect: GPF011
    trainer.fit(Segmenter(), datamodule=datamodule)


if __name__ == "__main__":
    main(None)
