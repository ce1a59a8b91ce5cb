# source: https://github.com/huggingface/accelerate/pull/299
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import logging
import os

import torch

from .checkpointing import load_accelerator_state
from .state import AcceleratorState, DistributedType

logger = logging.getLogger(__name__)


class Accelerator:
    def __init__(self, cpu: bool = False):
        self.state = AcceleratorState(cpu=cpu)
        self.scaler = None
        self._models = []
        self._optimizers = []

    @property
    def device(self):
        return self.state.device

    def _prepare_one(self, obj):
        if isinstance(obj, torch.nn.Module):
            self._models.append(obj)
            return self.prepare_model(obj)
        elif isinstance(obj, torch.optim.Optimizer):
            optimizer = self.prepare_optimizer(obj)
            self._optimizers.append(optimizer)
            return optimizer
        else:
            return obj

    def prepare(self, *args):
        result = tuple(self._prepare_one(obj) for obj in args)
        return result if len(result) > 1 else result[0]

    def prepare_model(self, model):
        model = model.to(self.device)
        if self.state.distributed_type == DistributedType.MULTI_GPU:
            model = torch.nn.parallel.DistributedDataParallel(
                model,
                device_ids=[self.state.local_process_index],
                output_device=self.state.local_process_index,
            )
        return model

    def prepare_optimizer(self, optimizer):
        return optimizer

    def load_state(self, input_dir: str):
        input_dir = os.path.expanduser(input_dir)
        if not os.path.isdir(input_dir):
            raise ValueError(f"Tried to find {input_dir} but folder does not exist")
        logger.info(f"Loading states from {input_dir}")
        load_accelerator_state(
            input_dir, self._models, self._optimizers, self.state.process_index, self.scaler
        )
