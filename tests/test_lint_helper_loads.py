"""GPF008 across modules: a `torch.load` without `map_location` in a function every rank runs,
defined in a module that starts no process group itself, is reported only when it loads weights
(its result goes to a model's or optimizer's `load_state_dict`). Reduced from accelerate#1156
(`load_custom_state` in checkpointing.py, called by the accelerator on every process)."""

from __future__ import annotations

from pathlib import Path

from gpufix.workload.lint import lint_paths

CKPT = """\
import torch


def load_model(model, path):
    model.load_state_dict({load})


def load_stats(path):
    return torch.load(path)
"""
TRAIN = """\
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from ckpt import load_model, load_stats


def train(model, rank, path):
    dist.init_process_group("nccl")
    torch.cuda.set_device(rank)
    model = DDP(model.cuda(rank), device_ids=[rank])
    {call}


if __name__ == "__main__":
    train(None, 0, "model.pt")
"""


def _gpf008(
    tmp_path: Path, call: str, load: str = "torch.load(path)"
) -> list[tuple[str, int, str]]:
    (tmp_path / "ckpt.py").write_text(CKPT.format(load=load))
    (tmp_path / "train.py").write_text(TRAIN.format(call=call))
    res = lint_paths([str(tmp_path)])
    return [(Path(f.path).name, f.line, f.message) for f in res.findings if f.rule == "GPF008"]


def test_weights_loaded_in_a_helper_every_rank_calls_are_reported(tmp_path: Path) -> None:
    ((name, line, msg),) = _gpf008(tmp_path, "load_model(model.module, path)")
    assert (name, line) == ("ckpt.py", 5)
    assert "every rank runs (train.py, which starts the process group, calls it)" in msg


def test_a_helper_load_of_data_is_not_reported(tmp_path: Path) -> None:
    assert _gpf008(tmp_path, "stats = load_stats(path)") == []


def test_a_helper_called_only_on_rank_zero_is_not_reported(tmp_path: Path) -> None:
    assert _gpf008(tmp_path, "if rank == 0: load_model(model.module, path)") == []


def test_a_helper_load_with_map_location_is_not_reported(tmp_path: Path) -> None:
    load = 'torch.load(path, map_location="cpu")'
    assert _gpf008(tmp_path, "load_model(model.module, path)", load) == []


LOADER = """\
import torch
import torch.distributed as dist


class Loader:
    def __init__(self, model):
        self.model = model

    def load(self, path):
        self.model.load_state_dict(torch.load(path))

    def resume(self, path):
        if dist.is_initialized():
            self.model.load_state_dict(torch.load(path, map_location="cpu"))
        else:
            self.model.load_state_dict(torch.load(path))
"""
RANKS = """\
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from loader import Loader


def train(model, rank, path):
    dist.init_process_group("nccl")
    torch.cuda.set_device(rank)
    loader = Loader(model)
    stats = torch.load(path, map_location="cpu")
    {call}
    DDP(model.cuda(rank), device_ids=[rank])


if __name__ == "__main__":
    train(None, 0, "model.pt")
"""


def _methods(tmp_path: Path, call: str) -> list[int]:
    (tmp_path / "loader.py").write_text(LOADER)
    (tmp_path / "train.py").write_text(RANKS.format(call=call))
    res = lint_paths([str(tmp_path)])
    return [f.line for f in res.findings if f.rule == "GPF008" and f.path.endswith("loader.py")]


def test_a_method_the_rank_code_calls_is_read(tmp_path: Path) -> None:
    assert _methods(tmp_path, "loader.load(path)") == [10]


def test_a_method_nobody_calls_is_not_read(tmp_path: Path) -> None:
    # CTMEDBERT's load_weights(), SPAMoE's load_experts(): the class is built, the method never
    # runs; `torch.load(...)` in the caller is not a call of a method named `load`.
    assert _methods(tmp_path, "pass  # loader.load(path) once") == []


def test_the_branch_without_a_group_is_not_read(tmp_path: Path) -> None:
    # SPAMoE's training_state.py: the `else` of `if dist.is_initialized()` runs in one process.
    assert _methods(tmp_path, "loader.resume(path)") == []


def test_a_special_method_runs_without_being_named(tmp_path: Path) -> None:
    # `loader(model, path)` runs Init.__call__: Python calls special methods itself.
    (tmp_path / "loader.py").write_text(
        "import torch\n\n\nclass Init:\n    def __call__(self, model, path):\n"
        "        model.load_state_dict(torch.load(path))\n"
    )
    (tmp_path / "train.py").write_text(
        RANKS.replace("from loader import Loader", "from loader import Init")
        .replace("loader = Loader(model)", "loader = Init()")
        .format(call="loader(model, path)")
    )
    res = lint_paths([str(tmp_path)])
    assert [(Path(f.path).name, f.line) for f in res.findings if f.rule == "GPF008"] == [
        ("loader.py", 6)
    ]
