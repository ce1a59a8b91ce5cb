# source: https://github.com/huggingface/accelerate/pull/299
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
__version__ = "0.7.0.dev0"

from .accelerator import Accelerator
from .state import DistributedType
