# source: https://github.com/lucidrains/imagen-pytorch/pull/132
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
from pathlib import Path

import torch
from accelerate import Accelerator


class ImagenTrainer:
    def __init__(self, imagen):
        self.accelerator = Accelerator()
        self.imagen = imagen

    def load(self, path):
        path = Path(path)
        loaded_obj = torch.load(str(path))  # expect: GPF008
        self.imagen.load_state_dict(loaded_obj["model"])
        return loaded_obj
