# source: https://github.com/Lightning-AI/pytorch-lightning/issues/364
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
from pytorch_lightning import Trainer


def main(gan_model):
    trainer = Trainer(gpus=2, distributed_backend="dp")  # expect: GPF011
    trainer.fit(gan_model)
