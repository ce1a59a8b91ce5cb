# source: https://github.com/huggingface/accelerate/pull/1156
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import logging
from pathlib import Path

import torch

logger = logging.getLogger(__name__)


def save_custom_state(obj, path, index: int = 0):
    """write obj.state_dict() to {path}/custom_checkpoint_{index}.pkl"""
    save_location = Path(path) / f"custom_checkpoint_{index}.pkl"
    logger.info(f"Saving the state of {type(obj).__name__} to {save_location}")
    torch.save(obj.state_dict(), save_location)


def load_custom_state(obj, path, index: int = 0):
    """read {path}/custom_checkpoint_{index}.pkl back into obj"""
    load_location = f"{path}/custom_checkpoint_{index}.pkl"
    logger.info(f"Loading the state of {type(obj).__name__} from {load_location}")
    obj.load_state_dict(torch.load(load_location))  # expect: GPF008
