# source: https://github.com/Z-Zheng/SimpleCV/pull/30
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import torch
import torch.distributed as dist


class Launcher:
    def __init__(self, model, local_rank):
        dist.init_process_group(backend="nccl", init_method="env://")
        torch.cuda.set_device(local_rank)
        self.model = torch.nn.parallel.DistributedDataParallel(
            model.cuda(), device_ids=[local_rank]
        )

    def resume(self, ckpt_path):
        state = torch.load(ckpt_path)  # expect: GPF008
        self.model.module.load_state_dict(state["model"])
