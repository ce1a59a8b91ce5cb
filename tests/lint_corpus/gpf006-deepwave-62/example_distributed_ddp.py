# source: https://github.com/ar4/deepwave/issues/62
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP

from deepwave import scalar


def setup(rank, world_size):
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ["MASTER_PORT"] = "12355"
    dist.init_process_group("nccl", rank=rank, world_size=world_size)  # expect: GPF006


def cleanup():
    dist.destroy_process_group()


class Model(torch.nn.Module):
    def __init__(self, initial, min_vel, max_vel):
        super().__init__()
        self.min_vel = min_vel
        self.max_vel = max_vel
        self.model = torch.nn.Parameter(torch.logit((initial - min_vel) / (max_vel - min_vel)))

    def forward(self):
        return torch.sigmoid(self.model) * (self.max_vel - self.min_vel) + self.min_vel


class Prop(torch.nn.Module):
    def __init__(self, model, dx, dt, freq):
        super().__init__()
        self.model = model
        self.dx = dx
        self.dt = dt
        self.freq = freq

    def forward(self, source_amplitudes, source_locations, receiver_locations):
        return scalar(
            self.model(),
            self.dx,
            self.dt,
            source_amplitudes=source_amplitudes,
            source_locations=source_locations,
            receiver_locations=receiver_locations,
            pml_freq=self.freq,
        )


def run_rank(rank, world_size):
    setup(rank, world_size)
    v_init = torch.full((250, 100), 1500.0)
    observed = torch.randn(16, 100, 300)
    amplitudes = torch.randn(16, 1, 300)
    src = torch.zeros(16, 1, 2, dtype=torch.long)
    rec = torch.zeros(16, 100, 2, dtype=torch.long)

    observed = torch.chunk(observed, world_size)[rank].to(rank)
    amplitudes = torch.chunk(amplitudes, world_size)[rank].to(rank)
    src = torch.chunk(src, world_size)[rank].to(rank)
    rec = torch.chunk(rec, world_size)[rank].to(rank)

    model = Model(v_init, 1000, 2500)
    prop = Prop(model, 4.0, 0.004, 25).to(rank)
    prop = DDP(prop, device_ids=[rank])
    loss_fn = torch.nn.MSELoss()
    optimiser = torch.optim.LBFGS(prop.parameters())

    def closure():
        optimiser.zero_grad()
        out = prop(amplitudes, src, rec)
        loss = loss_fn(out[-1], observed)
        loss.backward()
        return loss

    optimiser.step(closure)
    cleanup()


if __name__ == "__main__":
    n_gpus = torch.cuda.device_count()
    mp.spawn(run_rank, args=(n_gpus,), nprocs=n_gpus, join=True)
