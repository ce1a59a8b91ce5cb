# source: https://github.com/SayanoAI/RVC-Studio/issues/25
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import os
from random import randint

from lib.train import utils

hps = utils.get_hparams()
os.environ["CUDA_VISIBLE_DEVICES"] = hps.gpus.replace("-", ",")
os.environ["NCCL_P2P_DISABLE"] = 1  # expect: GPF004

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP

from lib.infer_pack.models import MultiPeriodDiscriminator, SynthesizerTrnMs768NSFsid


def main():
    n_gpus = len(hps.gpus.split("-")) if hps.gpus else torch.cuda.device_count()
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ["MASTER_PORT"] = str(randint(20000, 55555))
    children = {}
    gpu_devices = hps.gpus.split("-") if hps.gpus else range(n_gpus)
    for i, device in enumerate(gpu_devices):
        subproc = mp.Process(target=run, args=(i, n_gpus, hps, device))
        children[i] = subproc
        subproc.start()
    for i in gpu_devices:
        children[i].join()


def run(rank, n_gpus, hps, device):
    dist.init_process_group(backend="gloo", init_method="env://", world_size=n_gpus, rank=rank)
    if torch.cuda.is_available():
        torch.cuda.set_device(f"cuda:{device}")
    net_g = SynthesizerTrnMs768NSFsid(**hps.model)
    net_d = MultiPeriodDiscriminator(hps.model.use_spectral_norm)
    if torch.cuda.is_available():
        net_g = net_g.cuda(rank)
        net_d = net_d.cuda(rank)
        net_g = DDP(net_g, device_ids=[rank])
        net_d = DDP(net_d, device_ids=[rank])


if __name__ == "__main__":
    torch.multiprocessing.set_start_method("spawn")
    main()
