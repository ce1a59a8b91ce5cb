"""The lint rules: id, default level, what each reports, the fix, and the public reports behind it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

LEVELS = ("error", "warning", "note")  # SARIF levels, most severe first


@dataclass(frozen=True)
class LintRule:
    id: str
    name: str
    level: str  # default SARIF level: error | warning | note
    summary: str
    doc: str
    fix: str  # what to do, in one sentence
    sources: tuple[str, ...]  # public reports and documentation the rule comes from


RULES: tuple[LintRule, ...] = (
    LintRule(
        "GPF001",
        "cuda-env-after-torch-import",
        "error",
        "CUDA device-selection variable set after torch (or a CUDA library) was imported",
        "CUDA reads CUDA_VISIBLE_DEVICES / CUDA_DEVICE_ORDER once, when it initialises; after "
        "torch or another CUDA library is imported any call may initialise it, after which the "
        "assignment does nothing.",
        "Set the variable before the first torch-based import, or in the launch environment "
        "(`CUDA_VISIBLE_DEVICES=0,1 torchrun ...`).",
        (
            "https://github.com/pytorch/pytorch/issues/9158",
            "https://github.com/ultralytics/yolov5/issues/6431",
            "https://github.com/ultralytics/yolov5/issues/8395",
            "https://github.com/open-mmlab/mmdetection3d/issues/1020",
        ),
    ),
    LintRule(
        "GPF002",
        "data-parallel",
        "warning",
        "torch.nn.DataParallel is the only multi-GPU path",
        "DataParallel runs one process with a thread per GPU and scales poorly; PyTorch "
        "recommends DistributedDataParallel, one process per GPU. Not reported where the code "
        "also offers DDP (a single-process fallback) or implements a DP option for others.",
        "Launch one process per GPU (torchrun) and wrap the model in DistributedDataParallel.",
        (
            "https://pytorch.org/docs/stable/generated/torch.nn.DataParallel.html",
            "https://github.com/pytorch/pytorch/issues/65936",
            "https://github.com/mlfoundations/open_clip/pull/48",
        ),
    ),
    LintRule(
        "GPF003",
        "debug-knob-in-code",
        "warning",
        "NCCL / torch.distributed / CUDA debug setting hard-coded in training code",
        "NCCL_DEBUG=INFO/TRACE, NCCL_DEBUG_SUBSYS, NCCL_DEBUG_FILE, "
        "TORCH_DISTRIBUTED_DEBUG=DETAIL and CUDA_LAUNCH_BLOCKING=1 are for a debugging session; "
        "shipped in code they slow or flood every run.",
        "Delete the line and set the variable in the shell for the run you debug.",
        (
            "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting/logging.html",
            "https://discuss.pytorch.org/t/cuda-launch-blocking-1-reduces-the-training-speed/160924",
        ),
    ),
    LintRule(
        "GPF004",
        "nccl-p2p-disabled-in-code",
        "warning",
        "NCCL_P2P_DISABLE set in training code",
        "Disabling peer-to-peer makes NCCL copy through host memory: it costs bandwidth and hides "
        "the cause of a P2P hang (usually PCIe ACS / IOMMU).",
        "Delete the line; fix the host (gpufix plan), or set it per host where the GPUs have no "
        "P2P at all.",
        (
            "https://github.com/NVIDIA/nccl/issues/631",
            "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html",
        ),
    ),
    LintRule(
        "GPF005",
        "same-gpu-on-every-rank",
        "warning",
        "GPU 0 hard-coded in multi-process (DDP) code",
        "`cuda:0`, `.cuda(0)` or `map_location='cuda:0'` in code that starts a process group puts "
        "every rank on the first GPU (out of memory on GPU 0, or NCCL refusing duplicate GPUs).",
        "Use the rank's own device: `torch.device('cuda', local_rank)` after "
        "`torch.cuda.set_device(local_rank)`.",
        (
            "https://github.com/open-mmlab/mmengine/pull/665",
            "https://github.com/mir-group/nequip/pull/613",
        ),
    ),
    LintRule(
        "GPF006",
        "process-group-without-set-device",
        "warning",
        "process group created without selecting the rank's GPU",
        "Without torch.cuda.set_device(LOCAL_RANK) (or init_process_group(device_id=...)) every "
        "rank's `cuda` / `.cuda()` / barrier uses GPU 0 or a guessed GPU: extra contexts on "
        "GPU 0, and barriers that can hang.",
        "Call `torch.cuda.set_device(int(os.environ['LOCAL_RANK']))` before "
        "`init_process_group`, or pass `device_id=`.",
        (
            "https://github.com/pytorch/examples/pull/1142",
            "https://github.com/pytorch/pytorch/issues/124714",
            "https://github.com/deepspeedai/DeepSpeed/pull/7266",
            "https://github.com/NVIDIA/apex/issues/222",
        ),
    ),
    LintRule(
        "GPF007",
        "nvidia-smi-index-without-pci-order",
        "warning",
        "GPU index from nvidia-smi / NVML used for CUDA_VISIBLE_DEVICES or a torch device "
        "without PCI_BUS_ID order",
        "nvidia-smi and NVML number GPUs in PCI bus order; CUDA numbers them fastest first unless "
        "CUDA_DEVICE_ORDER=PCI_BUS_ID. On a host with mixed GPUs the job picks another GPU than "
        "the one chosen.",
        "Set `CUDA_DEVICE_ORDER=PCI_BUS_ID` in the launch environment, or in code before "
        "`CUDA_VISIBLE_DEVICES` and before any torch import (CUDA reads it once, when it "
        "starts).",
        (
            "https://github.com/anderskm/gputil/issues/18",
            "https://docs.nvidia.com/cuda/cuda-programming-guide/05-appendices/environment-variables.html",
        ),
    ),
    LintRule(
        "GPF008",
        "torch-load-without-map-location",
        "warning",
        "torch.load without map_location in multi-process (DDP) code",
        "Without map_location torch.load puts each tensor back on the GPU it was saved from "
        "(usually cuda:0): every rank creates a context and copies the checkpoint on GPU 0.",
        "Pass `map_location='cpu'` (or the rank's device).",
        (
            "https://github.com/pytorch/pytorch/issues/23138",
            "https://github.com/pytorch/examples/issues/1078",
            "https://github.com/pytorch/pytorch/pull/19084",
            "https://github.com/lucidrains/imagen-pytorch/pull/132",
        ),
    ),
    LintRule(
        "GPF009",
        "anomaly-detection-on",
        "warning",
        "autograd anomaly detection switched on in training code",
        "torch.autograd.set_detect_anomaly(True) / detect_anomaly() checks every backward step; "
        "PyTorch documents it for debugging only, and reports show 2x to 1000x slower training.",
        "Delete it, or switch it on from a debug flag.",
        (
            "https://github.com/yenchenlin/nerf-pytorch/issues/42",
            "https://github.com/Xingyu-Lin/mbpo_pytorch/issues/8",
            "https://github.com/facebookresearch/mmf/pull/434",
        ),
    ),
    LintRule(
        "GPF010",
        "nccl-transport-knob-in-code",
        "warning",
        "NCCL transport turned off or capped in training code",
        "NCCL_P2P_LEVEL, NCCL_SHM_DISABLE=1 and NCCL_IB_DISABLE=1 are workarounds: NCCL's docs ask "
        "not to keep its debugging variables in scripts, and left set they cost bandwidth on "
        "every host (IB off: multi-node traffic over TCP).",
        "Delete the line; set it per host or per run where a host needs it.",
        (
            "https://github.com/scottclowe/pytorch-experiment-template/issues/11",
            "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html",
        ),
    ),
    LintRule(
        "GPF011",
        "data-parallel-by-flag",
        "warning",
        "DataParallel chosen through a framework flag",
        "Lightning's `strategy='dp'` (also `accelerator='dp'`, `distributed_backend='dp'`) runs "
        "torch.nn.DataParallel underneath, with its limits; the Trainer dropped it in Lightning 2.0.",
        "Use `strategy='ddp'` and launch one process per GPU.",
        (
            "https://github.com/Lightning-AI/pytorch-lightning/pull/16748",
            "https://github.com/pytorch/pytorch/issues/65936",
        ),
    ),
    LintRule(
        "GPF900",
        "parse-error",
        "error",
        "file is not valid Python for the target version; it was not checked",
        "A syntax error for the target Python, an undecodable byte or nesting too deep.",
        "Fix the syntax, or set target-version to the Python the file is written for.",
        ("https://docs.python.org/3/library/ast.html#ast.parse",),
    ),
    LintRule(
        "GPF901",
        "not-checked-newer-syntax",
        "note",
        "file not parsed by this Python; it may be valid for a newer target",
        "ast can only parse a Python version up to the one it runs on: a file that fails here "
        "may be valid for the target version (or unknown target). It was not checked.",
        "Run gpufix lint under a Python at least as new as the target version.",
        ("https://docs.python.org/3/library/ast.html#ast.parse",),
    ),
)
RULES_BY_ID: Mapping[str, LintRule] = {r.id: r for r in RULES}
RULE_INDEX: Mapping[str, int] = {r.id: i for i, r in enumerate(RULES)}
