# source: https://github.com/pytorch/examples/issues/1078
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import os

import torch
from torch.distributed import init_process_group
from torch.nn.parallel import DistributedDataParallel as DDP


class Trainer:
    def __init__(self, model, snapshot_path):
        self.gpu_id = int(os.environ["LOCAL_RANK"])
        self.model = model.to(self.gpu_id)
        if os.path.exists(snapshot_path):
            self._load_snapshot(snapshot_path)
        self.model = DDP(self.model, device_ids=[self.gpu_id])

    def _load_snapshot(self, snapshot_path):
        snapshot = torch.load(snapshot_path)  # expect: GPF008
        self.model.load_state_dict(snapshot["MODEL_STATE"])


def main():
    init_process_group(backend="nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    Trainer(torch.nn.Linear(20, 1), "snapshot.pt")


if __name__ == "__main__":
    main()
