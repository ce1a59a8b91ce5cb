# source: https://github.com/open-mmlab/mmengine/pull/665
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import torch


class PretrainedInit:
    def __init__(self, checkpoint, map_location=None):
        self.checkpoint = checkpoint
        self.map_location = map_location

    def __call__(self, module):
        state = torch.load(self.checkpoint, map_location=self.map_location)  # expect: GPF008
        module.load_state_dict(state)
