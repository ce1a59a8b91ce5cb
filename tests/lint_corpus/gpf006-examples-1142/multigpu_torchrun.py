# source: https://github.com/pytorch/examples/pull/1142
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import os

import torch
import torch.nn.functional as F
from torch.distributed import destroy_process_group, init_process_group
from torch.nn.parallel import DistributedDataParallel as DDP


def ddp_setup():
    init_process_group(backend="nccl")  # expect: GPF006


class Trainer:
    def __init__(self, model, snapshot_path):
        self.gpu_id = int(os.environ["LOCAL_RANK"])
        self.model = model.to(self.gpu_id)
        if os.path.exists(snapshot_path):
            snapshot = torch.load(snapshot_path, map_location=f"cuda:{self.gpu_id}")
            self.model.load_state_dict(snapshot["MODEL_STATE"])
        self.model = DDP(self.model, device_ids=[self.gpu_id])

    def step(self, x, y):
        loss = F.cross_entropy(self.model(x.to(self.gpu_id)), y.to(self.gpu_id))
        loss.backward()


def main():
    ddp_setup()
    trainer = Trainer(torch.nn.Linear(20, 1), "snapshot.pt")
    trainer.step(torch.randn(4, 20), torch.zeros(4, dtype=torch.long))
    destroy_process_group()


if __name__ == "__main__":
    main()
