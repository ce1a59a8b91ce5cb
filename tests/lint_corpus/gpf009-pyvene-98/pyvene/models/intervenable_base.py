# source: https://github.com/stanfordnlp/pyvene/pull/98
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import torch
from torch import nn


class IntervenableModel(nn.Module):
    def __init__(self, model, mode="parallel"):
        super().__init__()
        self.model = model
        self.mode = mode

    def _wait_for_forward_with_parallel_intervention(self, sources, unit_locations):
        torch.autograd.set_detect_anomaly(True)  # expect: GPF009
        handlers = []
        for source in sources:
            if source is None:
                continue
            self.model(**source)
        return handlers

    def _wait_for_forward_with_serial_intervention(self, sources, unit_locations):
        handlers = []
        for source in sources:
            self.model(**source)
        return handlers

    def forward(self, base, sources=None, unit_locations=None):
        with torch.inference_mode():
            base_outputs = self.model(**base)
        if self.mode == "parallel":
            handlers = self._wait_for_forward_with_parallel_intervention(sources, unit_locations)
        elif self.mode == "serial":
            handlers = self._wait_for_forward_with_serial_intervention(sources, unit_locations)
        counterfactual_outputs = self.model(**base)
        return base_outputs, counterfactual_outputs
