# source: https://github.com/rwth-i6/returnn/issues/1469
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import torch
import torch.distributed as dist


class Engine:
    def init_train(self):
        dist.init_process_group("nccl")  # expect: GPF006
        self.device = torch.device("cuda")
        self.model = torch.nn.Linear(8, 8).to(self.device)
        self.ddp = torch.nn.parallel.DistributedDataParallel(self.model)
