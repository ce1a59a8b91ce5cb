# source: https://github.com/Lightning-AI/pytorch-lightning/issues/12344
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import pytorch_lightning as pl


def fit(model, datamodule):
    trainer = pl.Trainer(accelerator="gpu", devices=2, detect_anomaly=True)  # expect: GPF009
    trainer.fit(model, datamodule=datamodule)
