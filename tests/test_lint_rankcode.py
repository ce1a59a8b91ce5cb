"""GPF005 across modules (rankcode.py): GPU 0 in a function every rank runs, defined in a module
that starts no process group itself. Reduced from yolov7#2146 (the OTA loss builds its targets
on "cuda:0"; train.py starts the group and calls the loss on every rank)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from gpufix.workload.lint import lint_paths

LOSS = """\
import torch


class ComputeLoss:
    def __call__(self, p):
        return torch.arange(3, device="cuda:0")


def unused():
    return torch.zeros(1, device="cuda:0")
"""
TRAIN = """\
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from loss import ComputeLoss


def train(model, rank):
    dist.init_process_group("nccl")
    torch.cuda.set_device(rank)
    model = DDP(model, device_ids=[rank])
    {call}


if __name__ == "__main__":
    train(None, 0)
"""


def _gpf005(tmp_path: Path, call: str, head: str = "") -> set[tuple[str, int]]:
    (tmp_path / "loss.py").write_text(LOSS)
    (tmp_path / "train.py").write_text(head + TRAIN.format(call=textwrap.dedent(call).strip()))
    res = lint_paths([str(tmp_path)])
    return {(Path(f.path).name, f.line) for f in res.findings if f.rule == "GPF005"}


def test_a_callee_every_rank_runs_is_reported_once(tmp_path: Path) -> None:
    found = _gpf005(tmp_path, "loss = ComputeLoss()(model)")
    assert found == {("loss.py", 6)}  # not `unused`, which no rank calls
    res = lint_paths([str(tmp_path)])
    (msg,) = [f.message for f in res.findings if f.rule == "GPF005"]
    assert "every rank runs (train.py, which starts the process group, calls it)" in msg


def test_a_call_under_a_rank_test_does_not_count(tmp_path: Path) -> None:
    assert _gpf005(tmp_path, "if rank == 0: ComputeLoss()(model)") == set()


def test_a_caller_that_sets_visible_devices_gives_each_rank_its_cuda0(tmp_path: Path) -> None:
    head = "import os\nos.environ['CUDA_VISIBLE_DEVICES'] = os.environ['LOCAL_RANK']\n"
    assert _gpf005(tmp_path, "loss = ComputeLoss()(model)", head) == set()


def test_a_module_that_is_not_called_stays_quiet(tmp_path: Path) -> None:
    assert _gpf005(tmp_path, "pass") == set()


def test_names_from_every_caller_count_together(tmp_path: Path) -> None:
    # a.py calls the harmless function, b.py the one with GPU 0: reported whatever the order
    (tmp_path / "helper.py").write_text(
        "import torch\ndef ok():\n    return 1\ndef bad():\n    return torch.zeros(1, device='cuda:0')\n"
    )
    for name, fn in (("a.py", "ok"), ("b.py", "bad")):
        (tmp_path / name).write_text(
            "import torch.distributed as dist\nimport helper\n"
            f"dist.init_process_group('nccl')\nhelper.{fn}()\n"
        )
    res = lint_paths([str(tmp_path)])
    assert {(Path(f.path).name, f.line) for f in res.findings if f.rule == "GPF005"} == {
        ("helper.py", 5)
    }


def _with_loss(tmp_path: Path, train: str) -> set[tuple[str, int]]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "loss.py").write_text(LOSS)
    (tmp_path / "train.py").write_text(train)
    res = lint_paths([str(tmp_path)])
    return {(Path(f.path).name, f.line) for f in res.findings if f.rule == "GPF005"}


def test_an_unnamed_call_under_a_rank_test_does_not_hide_module_level_calls(
    tmp_path: Path,
) -> None:
    train = (
        "import torch.distributed as dist\nfrom loss import ComputeLoss\n"
        "dist.init_process_group('nccl')\nhooks = [print]\nrank = dist.get_rank()\n"
        "if rank == 0:\n    hooks[0]('x')\nloss_fn = ComputeLoss()\nloss_fn(None)\n"
    )
    assert _with_loss(tmp_path, train) == {("loss.py", 6)}


def test_main_process_tests_do_not_count(tmp_path: Path) -> None:
    train = (
        "import torch.distributed as dist\nfrom loss import ComputeLoss\n\n\ndef worker(acc):\n"
        "    dist.init_process_group('nccl')\n    if acc.is_local_main_process:\n"
        "        ComputeLoss()(None)\n    if trainer.is_global_zero:\n        ComputeLoss()(None)\n"
        "\n\nworker(None)\n"
    )
    assert _with_loss(tmp_path, train) == set()


def test_what_a_rank_zero_function_calls_is_not_every_ranks_code(tmp_path: Path) -> None:
    # `if rank == 0: evaluate()`, and evaluate calls inner, which calls the loss
    train = (
        "import torch\nimport torch.distributed as dist\nfrom loss import ComputeLoss\n\n\n"
        "def inner():\n    ComputeLoss()(None)\n    return torch.zeros(1, device='cuda:0')\n\n\n"
        "def evaluate():\n    return inner()\n\n\n"
        "def main(rank):\n    dist.init_process_group('nccl')\n    if rank == 0:\n        evaluate()\n"
    )
    run = '\n\nif __name__ == "__main__":\n    main(0)\n'
    assert _with_loss(tmp_path, train + run) == set()
    # called on every rank as well: reported in both modules
    every = train + "    inner()\n" + run
    assert _with_loss(tmp_path / "b", every) == {("loss.py", 6), ("train.py", 8)}


def test_a_main_block_that_spawns_the_ranks_is_the_parents_code(tmp_path: Path) -> None:
    worker = (
        "import torch.multiprocessing as mp\nimport torch.distributed as dist\n"
        "from loss import ComputeLoss\n\n\ndef worker(rank):\n    dist.init_process_group('nccl')\n\n\n"
    )
    parent = "if __name__ == '__main__':\n    ComputeLoss()(None)\n    mp.spawn(worker, nprocs=2)\n"
    assert _with_loss(tmp_path, worker + parent) == set()
    # the same call at module level outside the block runs again in every spawned child
    child = worker + "ComputeLoss()(None)\n" + parent
    assert _with_loss(tmp_path / "b", child) == {("loss.py", 6)}
    # a psutil.Process is no rank start
    ps = worker.replace("import torch.multiprocessing as mp", "import psutil as mp")
    assert _with_loss(tmp_path / "c", ps + parent) == {("loss.py", 6)}


IMAGENET = """\
import argparse
import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def build_model():
    model = torch.nn.Linear(4, 4)
    return model.cuda(0)


def main_worker(gpu, args):
    dist.init_process_group("nccl", rank=gpu, world_size=args.world_size)
    model = build_model()
    x = torch.zeros(4).to("cuda:0")
    return model(x)


def main():
    args = argparse.ArgumentParser().parse_args()
    if args.multiprocessing_distributed:
        mp.spawn(main_worker, nprocs=4, args=(args,))
    else:
        main_worker(args.gpu, args)
"""


def test_a_worker_that_starts_the_group_is_rank_code_under_any_test(tmp_path: Path) -> None:
    # pytorch/examples' ImageNet layout: main_worker runs under `if args.distributed` either
    # way; it and what it calls are every rank's code
    (tmp_path / "train.py").write_text(IMAGENET)
    res = lint_paths([str(tmp_path)])
    assert {f.line for f in res.findings if f.rule == "GPF005"} == {9, 15}


def test_a_torchrun_main_block_that_starts_a_helper_process_is_still_a_rank(
    tmp_path: Path,
) -> None:
    (tmp_path / "helpers.py").write_text(
        "import torch\ndef build():\n    return torch.nn.Linear(2, 2).cuda(0)\n"
    )
    train = (
        "import multiprocessing\nimport torch.distributed as dist\nimport helpers\n\n\n"
        "def log_worker():\n    pass\n\n\nif __name__ == '__main__':\n"
        "    dist.init_process_group('nccl')\n"
        "    multiprocessing.Process(target=log_worker).start()\n    model = helpers.build()\n"
    )
    (tmp_path / "train.py").write_text(train)
    res = lint_paths([str(tmp_path)])
    assert {(Path(f.path).name, f.line) for f in res.findings if f.rule == "GPF005"} == {
        ("helpers.py", 3)
    }
