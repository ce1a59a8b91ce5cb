# source: https://github.com/huggingface/accelerate/pull/1156
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
__version__ = "0.17.0.dev0"

from .accelerator import Accelerator
from .state import DistributedType, PartialState
