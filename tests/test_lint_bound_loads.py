"""GPF008's variable step (`_bound_loads`): a load bound to a name by one plain assignment and
handed to `load_state_dict` later in the same function counts as handed on, with that receiver's
last word (graphstorm#344's `load_opt_state`: `checkpoint = th.load(...)`, then
`dense_opts[0].load_state_dict(checkpoint["dense"])` under `if "dense" in checkpoint`)."""

from __future__ import annotations

from pathlib import Path

from gpufix.workload.lint import lint_paths

TRAIN = """\
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from ckpt import restore


def train(model, opts, rank, path):
    dist.init_process_group("nccl")
    torch.cuda.set_device(rank)
    model = DDP(model.cuda(rank), device_ids=[rank])
    restore(model, opts, path)


if __name__ == "__main__":
    train(None, [], 0, "model.pt")
"""


def _helper(tmp_path: Path, body: str) -> list[int]:
    """GPF008 lines in a helper `restore(model, opts, path)` every rank calls."""
    src = "import torch\n\n\ndef restore(model, opts, path):\n" + "".join(
        f"    {line}\n" for line in body.splitlines()
    )
    (tmp_path / "ckpt.py").write_text(src)
    (tmp_path / "train.py").write_text(TRAIN)
    res = lint_paths([str(tmp_path)])
    return [f.line for f in res.findings if f.rule == "GPF008" and f.path.endswith("ckpt.py")]


def test_a_bound_load_handed_on_under_a_branch_is_weights(tmp_path: Path) -> None:
    body = (
        'ckpt = torch.load(path)\nif "dense" in ckpt:\n    opts[0].load_state_dict(ckpt["dense"])'
    )
    assert _helper(tmp_path, body) == [5]


def test_get_and_the_state_dict_keyword_hand_on_the_name(tmp_path: Path) -> None:
    assert _helper(tmp_path, 'ckpt = torch.load(path)\nmodel.load_state_dict(ckpt.get("m"))') == [5]
    assert _helper(tmp_path, "sd = torch.load(path)\nmodel.load_state_dict(state_dict=sd)") == [5]


def test_a_receiver_with_tensors_wins_over_one_without(tmp_path: Path) -> None:
    body = (
        'ckpt = torch.load(path)\nsampler.load_state_dict(ckpt["sampler"])\n'
        'model.load_state_dict(ckpt["model"])'
    )
    assert _helper(tmp_path, body) == [5]


def test_a_parameter_the_load_replaces_is_read(tmp_path: Path) -> None:
    assert _helper(tmp_path, "path = torch.load(path)\nmodel.load_state_dict(path)") == [5]


def test_a_name_bound_twice_is_not_read(tmp_path: Path) -> None:
    body = "ckpt = torch.load(path)\nckpt = convert(ckpt)\nmodel.load_state_dict(ckpt)"
    assert _helper(tmp_path, body) == []
    body = "ckpt = torch.load(path)\nfor ckpt in parts(ckpt):\n    model.load_state_dict(ckpt)"
    assert _helper(tmp_path, body) == []
    body = "ckpt = torch.load(path)\nckpt += extra\nmodel.load_state_dict(ckpt)"
    assert _helper(tmp_path, body) == []


def test_a_use_before_the_load_or_in_a_nested_function_is_not_read(tmp_path: Path) -> None:
    body = "model.load_state_dict(ckpt)\nckpt = torch.load(path)"
    assert _helper(tmp_path, body) == []
    body = "ckpt = torch.load(path)\ndef later():\n    model.load_state_dict(ckpt)"
    assert _helper(tmp_path, body) == []


def test_a_bound_load_handed_to_a_data_loader_in_the_rank_module_is_not_reported(
    tmp_path: Path,
) -> None:
    (tmp_path / "train.py").write_text(
        "import torch\nimport torch.distributed as dist\n\n\ndef train(loader, path):\n"
        '    dist.init_process_group("nccl")\n    state = torch.load(path)\n'
        "    loader.load_state_dict(state)\n"
    )
    res = lint_paths([str(tmp_path)])
    assert [f.line for f in res.findings if f.rule == "GPF008"] == []
