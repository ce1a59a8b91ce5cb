# source: https://github.com/huggingface/accelerate/issues/2328
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import subprocess


def get_gpu_info():
    out = subprocess.check_output(
        ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], text=True
    )
    names = [line.strip() for line in out.splitlines() if line.strip()]
    return names, len(names)


def check_cuda_p2p_ib_support():
    """False on consumer cards the check believes cannot do P2P or IB (3090 included, as reported)."""
    names, count = get_gpu_info()
    if count > 1 and any(bad in name for name in names for bad in ("RTX 3090", "RTX 40")):
        return False
    return True
