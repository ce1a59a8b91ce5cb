# source: https://github.com/Lightning-AI/pytorch-lightning/issues/4073
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import pytorch_lightning as ptl


def test_run(model):
    trainer = ptl.Trainer(gpus=2, accelerator="dp", max_epochs=1)  # expect: GPF011
    trainer.fit(model)
