# source: https://github.com/Lightning-AI/pytorch-lightning/issues/4613
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import argparse

import pytorch_lightning as pl


def run_test(args, model, train_data, val_data):
    trainer = pl.Trainer(gpus=2, accelerator="dp", max_epochs=1)  # expect: GPF011
    trainer.fit(model, train_data, val_data)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--sampler", action="store_true")
    print(ap.parse_args())
