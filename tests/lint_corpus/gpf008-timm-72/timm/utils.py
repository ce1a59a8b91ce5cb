# source: https://github.com/huggingface/pytorch-image-models/issues/72
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import logging
from collections import OrderedDict
from copy import deepcopy

import torch
from torch import distributed as dist


def distribute_bn(model, world_size, reduce=False):
    for bn_name, bn_buf in model.named_buffers(recurse=True):
        if ("running_mean" in bn_name) or ("running_var" in bn_name):
            if reduce:
                torch.distributed.all_reduce(bn_buf, op=dist.ReduceOp.SUM)
                bn_buf /= float(world_size)
            else:
                torch.distributed.broadcast(bn_buf, 0)


class ModelEma:
    def __init__(self, model, decay=0.9999, device="", resume=""):
        self.ema = deepcopy(model)
        self.ema.eval()
        self.decay = decay
        self.device = device
        if device:
            self.ema.to(device=device)
        self.ema_has_module = hasattr(self.ema, "module")
        if resume:
            self._load_checkpoint(resume)
        for p in self.ema.parameters():
            p.requires_grad_(False)

    def _load_checkpoint(self, checkpoint_path):
        checkpoint = torch.load(checkpoint_path)  # expect: GPF008
        assert isinstance(checkpoint, dict)
        if "state_dict_ema" in checkpoint:
            new_state_dict = OrderedDict()
            for k, v in checkpoint["state_dict_ema"].items():
                name = "module." + k if self.ema_has_module and not k.startswith("module") else k
                new_state_dict[name] = v
            self.ema.load_state_dict(new_state_dict)
            logging.info("Loaded state_dict_ema")
