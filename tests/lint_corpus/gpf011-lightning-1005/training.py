# source: https://github.com/Lightning-AI/pytorch-lightning/issues/1005
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
"""
Runs a model on a single node across N-gpus.
"""

from bert_classifier import BERTClassifier
from pytorch_lightning import Trainer
from test_tube import HyperOptArgumentParser


def main(hparams) -> None:
    model = BERTClassifier(hparams)
    trainer = Trainer(
        default_save_path="experiments/",
        gpus=hparams.gpus,
        distributed_backend=hparams.distributed_backend,
        use_amp=hparams.use_16bit,
        max_epochs=hparams.max_epochs,
    )
    trainer.fit(model)


if __name__ == "__main__":
    parser = HyperOptArgumentParser(
        strategy="random_search",
        description="Minimalist BERT Classifier",
        add_help=False,
    )
    parser.add_argument("--max_epochs", default=2, type=int)
    parser.add_argument("--gpus", type=int, default=2, help="How many gpus")
    parser.add_argument(
        "--distributed_backend",
        type=str,
        default="dp",  # expect: GPF011
        help="Supports three options dp, ddp, ddp2",
    )
    parser.add_argument("--use_16bit", dest="use_16bit", action="store_true")
    parser = BERTClassifier.add_model_specific_args(parser)
    hparams = parser.parse_args()
    main(hparams)
