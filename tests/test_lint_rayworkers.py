"""Ray GPU workers (rayworkers.py): Ray Tune and Ray core give each worker its own GPUs, Ray Train
shares a node's GPUs among its workers (GPF005, GPF006, GPF008)."""

from __future__ import annotations

import textwrap

import pytest
from gpufix.workload.lint import lint_source

# A rank function that starts an NCCL group and resumes from a checkpoint without map_location
# (spacecraft1013/NIH-X-Ray's Tune script, reduced).
RANK = """
    import torch
    import torch.distributed as dist

    def train(config, checkpoint_dir=None):
        dist.init_process_group("nccl")
        state = torch.load(checkpoint_dir + "/checkpoint")
        model = torch.nn.Linear(1, 1).to(torch.device("cuda"))
        model.load_state_dict(state)
    """


def _rules(src: str) -> list[str]:
    return [f.rule for f in lint_source(textwrap.dedent(src), "t.py")]


@pytest.mark.parametrize(
    "launch",
    [
        # Tune's DDP trainable: one Ray actor per rank, each with its own CUDA_VISIBLE_DEVICES.
        "from ray.tune.integration.torch import DistributedTrainableCreator\n"
        "import ray\n"
        "cls = DistributedTrainableCreator(train, use_gpu=True, num_workers=2, backend='nccl')\n"
        "ray.tune.run(cls)\n",
        "from ray import tune\ntune.run(train, resources_per_trial={'gpu': 1})\n",
        "import ray\nworker = ray.remote(num_gpus=1)(train)\n",
        # Lines without any of the call index's words (the check walks the whole module).
        "from ray import tune\ndef objective(c):\n    return train(c)\n"
        "tune.run(objective, resources_per_trial={'gpu': 1})\n",
        "import ray\n@ray.remote(num_gpus=1)\nclass Worker:\n    def go(self):\n        pass\n",
        "import ray\nclass W:\n    pass\nw = ray.remote(W).options(num_gpus=1).remote()\n",
        "import psutil, ray\nworker = ray.remote(num_gpus=1)(train)\n",
    ],
)
def test_ray_tune_and_core_workers_see_their_own_gpu(launch: str) -> None:
    assert "GPF008" in _rules(RANK)
    assert "GPF008" not in _rules(textwrap.dedent(RANK) + launch)


@pytest.mark.parametrize(
    "launch",
    [
        # Ray Train's Torch backend shares a node's GPUs among its workers.
        "from ray.train.torch import TorchTrainer\nfrom ray.train import ScalingConfig\n"
        "TorchTrainer(train, scaling_config=ScalingConfig(num_workers=2, use_gpu=True)).fit()\n",
        "from ray import tune\nfrom ray.train.torch import TorchTrainer\n"
        "tune.Tuner(TorchTrainer(train)).fit()\n",
        # A trial that spawns its own ranks shares the trial's GPUs among them.
        "from ray import tune\nimport torch.multiprocessing as mp\n"
        "def trial(config):\n    mp.spawn(train, nprocs=2)\n"
        "tune.run(trial, resources_per_trial={'gpu': 2})\n",
        # ray.remote without GPUs places nothing; a fraction puts two actors on one GPU.
        "import ray\nworker = ray.remote(train)\n",
        "import ray\nworker = ray.remote(num_gpus=0.5)(train)\n",
        "import ray\nworker = ray.remote(num_gpus=0)(train)\n",
        "import ray\nworker = ray.remote(train).options(num_gpus=0.25)\n",
        # Ray told to leave CUDA_VISIBLE_DEVICES alone: every actor sees every GPU.
        "import os, ray\nos.environ['RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES'] = '1'\n"
        "worker = ray.remote(num_gpus=1)(train)\n",
        # Ranks started inside a trial share its GPUs.
        "import subprocess\nfrom ray import tune\ndef trial(c):\n"
        "    subprocess.run(['torchrun', '--nproc_per_node=2', 'x.py'])\n"
        "tune.run(trial, resources_per_trial={'gpu': 2})\n",
        "import pytorch_lightning as pl\nfrom ray import tune\ndef trial(c):\n"
        "    pl.Trainer(devices=2, strategy='ddp_spawn').fit(None)\n"
        "tune.run(trial, resources_per_trial={'gpu': 2})\n",
        # RaySGD v2 already shared a node's GPUs among its workers.
        "from ray.util.sgd.v2 import Trainer\nfrom ray import tune\n"
        "tune.run(Trainer(backend='torch', num_workers=2, use_gpu=True).to_tune_trainable(train))\n",
    ],
)
def test_ray_train_and_own_processes_still_report(launch: str) -> None:
    assert "GPF008" in _rules(textwrap.dedent(RANK) + launch)
