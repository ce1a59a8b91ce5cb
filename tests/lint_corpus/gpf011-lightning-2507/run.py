# source: https://github.com/Lightning-AI/pytorch-lightning/issues/2507
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import pytorch_lightning as pl


def run(model):
    trainer = pl.Trainer(gpus=4, distributed_backend="dp", max_epochs=1)  # expect: GPF011
    trainer.fit(model)
