# source: https://github.com/awslabs/graphstorm/issues/344
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import torch as th

from .utils import load_opt_state, save_opt_state
from ..utils import get_rank


class GSOptimizer:
    """the model's dense, language-model and sparse optimizers together"""

    def __init__(self, dense_opts=None, lm_opts=None, sparse_opts=None):
        self.dense_opts = dense_opts or []
        self.lm_opts = lm_opts or []
        self.sparse_opts = sparse_opts or []

    def move_to_device(self, device):
        for opt in self.dense_opts + self.lm_opts:
            for state in opt.state.values():
                for key, value in state.items():
                    if th.is_tensor(value):
                        state[key] = value.to(device)

    def load_opt_state(self, path, device=None):
        load_opt_state(path, self.dense_opts, self.lm_opts, self.sparse_opts)
        if device is not None:
            self.move_to_device(device)

    def save_opt_state(self, path):
        if get_rank() == 0:
            save_opt_state(path, self.dense_opts, self.lm_opts, self.sparse_opts)
