# source: https://github.com/Lightning-AI/pytorch-lightning/issues/14630
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
from pytorch_lightning import Trainer


def main(model, train_loader):
    trainer = Trainer(accelerator="gpu", devices=2, strategy="dp", max_epochs=1)  # expect: GPF011
    trainer.fit(model, train_loader)
