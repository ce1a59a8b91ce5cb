# source: https://github.com/Lightning-AI/pytorch-lightning/issues/17359
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
from lightning.pytorch import Trainer


def main(model, dm):
    trainer = Trainer(max_epochs=10, detect_anomaly=True)  # expect: GPF009
    trainer.fit(model, dm)
