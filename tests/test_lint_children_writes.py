"""GPF001 and writes meant for the processes started next, not for the process itself.

Reduced from code-with-zeeshan/universal-translation-system `pipeline/training/trainer.py`
(seventeenth precision set, all five rows judged FP): the trainer hides every GPU right before
iterating a DataLoader, so that the workers the loop starts make no CUDA context, puts the saved
value back after the first batch (in two methods, under one name), and hides them again in the
loaders' `worker_init_fn`. The process keeps the GPU it already initialised."""

from __future__ import annotations

from pathlib import Path

import pytest
from gpufix.workload.lint import lint_paths

HEAD = """\
import os

import torch


"""

WORKER = """\
def _worker_init_fn(worker_id):
    os.environ["CUDA_VISIBLE_DEVICES"] = {value}


def loaders(data):
    return torch.utils.data.DataLoader(data, num_workers=2, worker_init_fn=_worker_init_fn)
"""

EPOCH = """\
class Trainer:
    def train_epoch(self, train_loader):
        saved = os.environ.get("CUDA_VISIBLE_DEVICES", "")
        os.environ["CUDA_VISIBLE_DEVICES"] = {value}
        for step, batch in enumerate({loader}):
            if step == 0:
                os.environ["CUDA_VISIBLE_DEVICES"] = saved
            batch.cuda()

    def validate(self, val_loader):
        saved = os.environ.get("CUDA_VISIBLE_DEVICES", "")
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
        for batch in val_loader:
            os.environ["CUDA_VISIBLE_DEVICES"] = saved
"""


def _lines(tmp_path: Path, text: str) -> list[int]:
    """GPF001's lines, with every function defined called from the `__main__` block (lint
    leaves code nothing calls alone)."""
    calls = [
        f"    {name}(None)" for name in ("loaders", "run", "restore") if f"def {name}(" in text
    ]
    if "class Trainer" in text:
        calls += ["    Trainer().train_epoch([])", "    Trainer().validate([])"]
    main = '\n\nif __name__ == "__main__":\n' + "\n".join(calls) + "\n"
    (tmp_path / "trainer.py").write_text(HEAD + text + main)
    found = lint_paths([str(tmp_path)]).findings
    return sorted(f.line for f in found if f.rule == "GPF001")


def test_the_trainer_hides_gpus_from_its_loader_workers(tmp_path: Path) -> None:
    text = WORKER.format(value='""') + "\n\n" + EPOCH.format(value='""', loader="train_loader")
    assert _lines(tmp_path, text) == []


@pytest.mark.parametrize("value", ['"1"', '"0,1"'])
def test_a_gpu_chosen_before_the_loop_is_for_the_process_itself(tmp_path: Path, value: str) -> None:
    """Only hiding every GPU is for the workers; choosing one is the late write GPF001 means."""
    assert _lines(tmp_path, EPOCH.format(value=value, loader="train_loader")) == [9]


def test_a_loop_over_something_else_starts_no_workers(tmp_path: Path) -> None:
    assert _lines(tmp_path, EPOCH.format(value='""', loader="self.items")) == [9]


def test_minus_one_hides_every_gpu_too(tmp_path: Path) -> None:
    assert _lines(tmp_path, EPOCH.format(value='"-1"', loader="tqdm(train_loader)")) == []


def test_a_restore_of_a_name_bound_twice_in_the_function_is_reported(tmp_path: Path) -> None:
    text = """\
def run(loader):
    saved = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    saved = "0"
    os.environ["CUDA_VISIBLE_DEVICES"] = saved
"""
    assert _lines(tmp_path, text) == [9]


def test_a_restore_of_another_variable_is_reported(tmp_path: Path) -> None:
    text = """\
def run(loader):
    saved = os.environ.get("LOCAL_RANK", "0")
    os.environ["CUDA_VISIBLE_DEVICES"] = saved
"""
    assert _lines(tmp_path, text) == [8]


def test_a_parameter_is_no_saved_value(tmp_path: Path) -> None:
    text = """\
saved = os.environ.get("CUDA_VISIBLE_DEVICES", "")


def run(saved):
    os.environ["CUDA_VISIBLE_DEVICES"] = saved
"""
    assert _lines(tmp_path, text) == [10]


def test_a_module_level_saved_value_still_counts(tmp_path: Path) -> None:
    """vLLM's guard_cuda_initialization shape: the read at module level, the restore below."""
    text = """\
saved = os.environ.get("CUDA_VISIBLE_DEVICES", "")


def restore():
    os.environ["CUDA_VISIBLE_DEVICES"] = saved
"""
    assert _lines(tmp_path, text) == []


def test_a_worker_init_fn_that_picks_a_gpu_is_reported(tmp_path: Path) -> None:
    assert _lines(tmp_path, WORKER.format(value='"1"')) == [7]


def test_a_worker_init_fn_also_called_directly_is_reported(tmp_path: Path) -> None:
    text = WORKER.format(value='""') + "\n\n_worker_init_fn(0)\n"
    assert _lines(tmp_path, text) == [7]


def test_a_worker_init_fn_also_named_in_a_string_is_reported(tmp_path: Path) -> None:
    text = WORKER.format(value='""') + '\n\nHOOKS = {"init": "_worker_init_fn"}\n'
    assert _lines(tmp_path, text) == [7]


def test_a_worker_init_fn_called_from_another_module_is_reported(tmp_path: Path) -> None:
    (tmp_path / "other.py").write_text(
        "from trainer import _worker_init_fn\n\n_worker_init_fn(0)\n"
    )
    assert _lines(tmp_path, WORKER.format(value='""')) == [7]


def test_a_blank_write_before_a_loader_loop_that_is_never_undone_is_reported(
    tmp_path: Path,
) -> None:
    """CPU-forcing: the GPUs are meant to stay hidden for the process itself (second review)."""
    text = """\
def run(train_loader):
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    for batch in train_loader:
        batch.cuda()
"""
    assert _lines(tmp_path, text) == [7]


def test_a_saved_name_in_a_nested_function_is_not_the_functions_own(tmp_path: Path) -> None:
    text = """\
def run(loader):
    def helper():
        saved = os.environ.get("CUDA_VISIBLE_DEVICES", "")
        return saved

    os.environ["CUDA_VISIBLE_DEVICES"] = saved
"""
    assert _lines(tmp_path, text) == [11]


def test_a_blank_device_order_is_no_hiding(tmp_path: Path) -> None:
    text = EPOCH.format(value='""', loader="train_loader").replace(
        'os.environ["CUDA_VISIBLE_DEVICES"] = ""', 'os.environ["CUDA_DEVICE_ORDER"] = ""', 1
    )
    assert 9 in _lines(tmp_path, text)


def test_a_worker_init_fn_imported_under_another_name_is_reported(tmp_path: Path) -> None:
    (tmp_path / "other.py").write_text(
        "from trainer import _worker_init_fn as cpu_only\n\ncpu_only(0)\n"
    )
    assert _lines(tmp_path, WORKER.format(value='""')) == [7]


def test_a_worker_init_fn_handed_to_a_wrapper_is_reported(tmp_path: Path) -> None:
    """Only torch's DataLoader is known to call it in worker processes alone."""
    text = WORKER.format(value='""').replace(
        "torch.utils.data.DataLoader(data, num_workers=2, worker_init_fn=_worker_init_fn)",
        "make_loader(data, worker_init_fn=_worker_init_fn)",
    )
    text += "\n\ndef make_loader(data, worker_init_fn):\n    worker_init_fn(0)\n"
    assert _lines(tmp_path, text) == [7]
