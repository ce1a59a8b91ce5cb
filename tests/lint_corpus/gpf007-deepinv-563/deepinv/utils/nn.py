# source: https://github.com/deepinv/deepinv/issues/563
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import os
import subprocess
from warnings import warn

import numpy as np
import torch


def get_freer_gpu(verbose=True):
    """The GPU with the most free memory; nvidia-smi first, torch's own count as the fallback."""
    try:
        query = "nvidia-smi -q -d Memory | grep -A5 GPU | grep Free"
        use_shell = os.name == "posix"
        if not use_shell:
            query = ["bash", "-c", query]
        result = subprocess.run(query, shell=use_shell, capture_output=True, text=True)
        free_mib = [int(row.split()[2]) for row in result.stdout.splitlines()]
        idx, mem = np.argmax(free_mib), np.max(free_mib)
        device = torch.device(f"cuda:{idx}")  # expect: GPF007
    except Exception:
        count = torch.cuda.device_count()
        if count == 0:
            warn("Couldn't find free GPU")
            return torch.device("cuda")
        idx, mem = max(
            ((d, torch.cuda.mem_get_info(d)[0] / 1048576) for d in range(count)),
            key=lambda pair: pair[1],
        )
        device = torch.device(f"cuda:{idx}")
    if verbose:
        print(f"Selected GPU {idx} with {mem} MiB free memory")
    return device
