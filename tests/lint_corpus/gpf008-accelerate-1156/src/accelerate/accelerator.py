# source: https://github.com/huggingface/accelerate/pull/1156
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import logging
import os

import torch

from .checkpointing import load_custom_state, save_custom_state
from .state import DistributedType, PartialState

logger = logging.getLogger(__name__)


class Accelerator:
    def __init__(self, cpu: bool = False):
        self.state = PartialState(cpu=cpu)
        self._models = []
        self._custom_objects = []

    @property
    def device(self):
        return self.state.device

    def prepare_model(self, model):
        model = model.to(self.device)
        if self.state.distributed_type == DistributedType.MULTI_GPU:
            model = torch.nn.parallel.DistributedDataParallel(
                model,
                device_ids=[self.state.local_process_index],
                output_device=self.state.local_process_index,
            )
        self._models.append(model)
        return model

    def register_for_checkpointing(self, *objects):
        for obj in objects:
            if not hasattr(obj, "state_dict") or not hasattr(obj, "load_state_dict"):
                raise ValueError(f"{type(obj).__name__} needs state_dict and load_state_dict")
        self._custom_objects.extend(objects)

    def save_state(self, output_dir: str):
        os.makedirs(output_dir, exist_ok=True)
        for i, obj in enumerate(self._custom_objects):
            save_custom_state(obj, output_dir, i)

    def load_state(self, input_dir: str):
        custom_checkpoints = [f for f in os.listdir(input_dir) if "custom_checkpoint" in f]
        if len(custom_checkpoints) != len(self._custom_objects):
            logger.warning("the saved custom states do not match the registered objects")
            return
        for index, obj in enumerate(self._custom_objects):
            load_custom_state(obj, input_dir, index)
