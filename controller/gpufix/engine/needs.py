"""What a plan asks the operator to gather or run when a deciding fact or experiment is missing.

Each need names the command that would supply it; the engine never guesses the answer.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from types import MappingProxyType

from gpufix.engine.kb_evidence import NEEDS

TEXT: Mapping[str, str] = MappingProxyType(
    {
        "probe": "run `gpufix probe HOST`: no probe verdict yet, so nothing in this plan was "
        "decided by the hang itself; the probe names the phase and rank that stall and runs its "
        "experiments, and the plan made from its verdict (--probe-verdict) can differ",
        "gpu-probe": "run `gpufix probe HOST` (or GROUP --multi-node) without --cpu or "
        "--backend gloo: the probe ran gloo, so NCCL took no part in it (and on --cpu neither "
        "did the GPUs or their peer path)",
        "experiments": "run `gpufix probe HOST`: its experiments change one NCCL mechanism at a "
        "time (a bigger --experiment-budget when some were skipped)",
        "multinode-probe": "run `gpufix probe GROUP --multi-node`: it names the failing layer and "
        "tries the hosts' interfaces and IB off over the real network path",
        "soak": "run `gpufix probe HOST --soak` for a hang that comes after the first collective",
        "acs": "ACS on the PCIe bridges above the GPUs: `gpufix facts HOST` with become (lspci "
        "reads ACS control only as root)",
        "iommu": "the IOMMU mode: `gpufix facts HOST` (kernel command line, /sys/class/iommu)",
        "gpus": "the GPU models and topology: `gpufix facts HOST` (nvidia-smi, topo -p2p r)",
        "driver": "the driver version: `gpufix facts HOST`",
        "driver-apt": "whether apt still offers the installed driver's exact version (then "
        "fabric manager is installed at it, with no driver move and no reboot): `gpufix facts "
        "HOST` reads apt-cache policy",
        "fabricmanager": "the fabric manager's version and state: `gpufix facts HOST` with become",
        "shm": "the training container's /dev/shm: `gpufix facts` inside it (or the --shm-size / "
        "--ipc its run command uses)",
        "container-runtime": "what starts the training containers: `gpufix facts HOST` reads "
        "whether Docker runs there and, since facts module 1.6.0, whether it is a Kubernetes "
        "node; `gpufix facts` inside the training container reads its /dev/shm. Docker's "
        "default-shm-size does not reach pods",
        "nccl-version": "the NCCL the job loads: `gpufix facts HOST --python-env PY` with the "
        "training interpreter (its nvidia-nccl-cu* wheel and torch)",
        "python-env": "the training environment's torch, Python and glibc: `gpufix facts HOST "
        "--python-env PY`",
        "interfaces": "every host's interfaces: `gpufix facts HOST` on each host",
        "interface-choice": "which interface reaches the other hosts: the plan names the facts' "
        "first physical interface, which no run showed working (NCCL may pick it already); "
        "`gpufix probe GROUP --multi-node` tries each of the hosts' interfaces "
        "(ifname-NAME experiments) and the plan made from its verdict names the one that works",
        "ib-fabric": "the IB/RoCE devices and fabric (outside gpufix): on each host ibstat or "
        "ibv_devinfo (port state Active, link layer), `dmesg | grep mlx5_core` and the HCA "
        "firmware; show_gids for the RoCE v2 GID index; ib_write_bw between hosts for a job "
        "across them; an HCA that is down can be left out with NCCL_IB_HCA instead of turning "
        "IB off",
        "image": "the training image, pinned: plan again with `--image REF@sha256:DIGEST`; the "
        "gpufix-run wrapper then starts it with --network host and --ipc=host",
        "gpu-diagnostics": "the suspect GPU and its links, outside gpufix: `dcgmi diag -r 3 -i "
        "N` (PCIe and NVLink checks; N the GPU's index as nvidia-smi numbers it, which is PCI "
        "bus order, while the probe's index is CUDA's order unless CUDA_DEVICE_ORDER=PCI_BUS_ID: "
        "match them by the bus id), Xid and AER lines in the kernel log (`journalctl -k | grep "
        "-E 'Xid|AER'`), the link width and speed (`lspci -vvv -s BUS_ID`, LnkSta), and on "
        "NVLink hosts `nvidia-smi nvlink -e` for error counters",
        "workload": "the training program: `gpufix lint PATH` (CUDA_VISIBLE_DEVICES set after "
        "import torch, the same GPU on every rank, DataParallel) and `gpufix preflight` in the "
        "job's own environment",
    }
)
assert set(TEXT) == set(NEEDS), "every need the table may name has a text"


_PLAIN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")


def name_host(text: str, host: str) -> str:
    """`gpufix probe HOST` / `gpufix facts HOST` in TEXT with the planned host's name when it is
    a plain word (one to copy into a shell as it is); else HOST stays."""
    if not _PLAIN_NAME.fullmatch(host):
        return text
    return re.sub(
        r"\bgpufix (probe|facts|plan) HOST\b", lambda m: f"gpufix {m.group(1)} {host}", text
    )


def describe(ids: Iterable[str], host: str = "") -> list[dict[str, str]]:
    """[{"id", "how"}] in the order given, each once; the commands name the planned host."""
    return [{"id": i, "how": name_host(TEXT[i], host)} for i in dict.fromkeys(ids)]
