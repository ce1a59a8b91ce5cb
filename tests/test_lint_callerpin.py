"""GPF005 in a function its callers run after pinning the process to one GPU (callerpin.py).

Reduced from I-JEPA's launcher (facebookresearch/ijepa main.py): process_main(rank) sets
CUDA_VISIBLE_DEVICES to devices[rank], then calls src.train.main, which uses cuda:0. The
training module sits in `src/` without an __init__.py (a namespace package)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from gpufix.workload.lint import lint_paths

TRAIN = """\
import torch
import torch.distributed as dist


def main(args):
    dist.init_process_group("nccl")
    device = torch.device("cuda:0")
    torch.cuda.set_device(device)
    return device
{tail}"""

LAUNCH = """\
import multiprocessing as mp
import os

from src.train import main as app_main


def process_main(rank, devices):
{body}


if __name__ == "__main__":
    devices = ["cuda:0", "cuda:1"]
    for rank in range(len(devices)):
        mp.Process(target=process_main, args=(rank, devices)).start()
"""

PIN = "    os.environ['CUDA_VISIBLE_DEVICES'] = str(devices[rank].split(':')[-1])"
CALL = "    app_main(args=None)"


def _gpf005(tmp_path: Path, body: str, tail: str = "", launch: str = LAUNCH) -> list[int]:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(TRAIN.format(tail=tail))
    (tmp_path / "main.py").write_text(launch.format(body=textwrap.indent(body, "")))
    found = lint_paths([str(tmp_path)]).findings
    return [f.line for f in found if f.rule == "GPF005" and f.path.endswith("train.py")]


def test_the_ijepa_launcher_pins_each_rank_before_main(tmp_path: Path) -> None:
    assert _gpf005(tmp_path, f"{PIN}\n{CALL}") == []


def test_without_the_launcher_the_finding_stays(tmp_path: Path) -> None:
    assert _gpf005(tmp_path, CALL) == [7]


def test_a_write_after_the_call_does_not_pin(tmp_path: Path) -> None:
    assert _gpf005(tmp_path, f"{CALL}\n{PIN}") == [7]


def test_a_write_under_an_if_does_not_pin(tmp_path: Path) -> None:
    body = f"    if rank > 0:\n    {PIN}\n{CALL}"
    assert _gpf005(tmp_path, body) == [7]


def test_one_constant_gpu_for_every_rank_does_not_pin(tmp_path: Path) -> None:
    body = f"    os.environ['CUDA_VISIBLE_DEVICES'] = '0'\n{CALL}"
    assert _gpf005(tmp_path, body) == [7]


def test_a_list_of_several_gpus_does_not_pin(tmp_path: Path) -> None:
    body = f"    os.environ['CUDA_VISIBLE_DEVICES'] = ','.join(['0', '1'])\n{CALL}"
    assert _gpf005(tmp_path, body) == [7]


def test_the_modules_own_main_block_calls_it_unpinned(tmp_path: Path) -> None:
    tail = '\n\nif __name__ == "__main__":\n    main(None)\n'
    assert _gpf005(tmp_path, f"{PIN}\n{CALL}", tail) == [7]


def test_a_main_block_call_that_cannot_bind_never_runs_it(tmp_path: Path) -> None:
    # main() for `def main(args)` raises TypeError before the body (TexJEPA's src/pretrain.py)
    tail = '\n\nif __name__ == "__main__":\n    main()\n'
    assert _gpf005(tmp_path, f"{PIN}\n{CALL}", tail) == []


def test_handing_the_function_to_spawn_is_an_unpinned_reference(tmp_path: Path) -> None:
    launch = LAUNCH.replace(
        "        mp.Process(target=process_main, args=(rank, devices)).start()",
        "        mp.Process(target=app_main, args=(None,)).start()",
    )
    assert _gpf005(tmp_path, f"{PIN}\n{CALL}", launch=launch) == [7]


def test_another_caller_without_the_pin_keeps_the_finding(tmp_path: Path) -> None:
    launch = LAUNCH + "\n\ndef evaluate():\n    app_main(args=None)\n"
    assert _gpf005(tmp_path, f"{PIN}\n{CALL}", launch=launch) == [7]


TRAIN_LOAD = """\
import torch
import torch.distributed as dist


def main(args):
    dist.init_process_group("nccl")
    state = torch.load(args.checkpoint)
    return torch.zeros(1).cuda(), state
"""


def _rules(tmp_path: Path, body: str) -> list[tuple[str, int]]:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(TRAIN_LOAD)
    (tmp_path / "main.py").write_text(LAUNCH.format(body=body))
    found = lint_paths([str(tmp_path)]).findings
    return sorted((f.rule, f.line) for f in found if f.path.endswith("train.py"))


def test_the_pin_also_covers_the_current_device_and_loads(tmp_path: Path) -> None:
    # GPF006 (no set_device) and GPF008 (no map_location) land on the one visible GPU
    assert _rules(tmp_path, f"{PIN}\n{CALL}") == []


def test_without_the_pin_the_device_and_load_findings_stay(tmp_path: Path) -> None:
    assert _rules(tmp_path, CALL) == [("GPF006", 6), ("GPF008", 7)]


def test_a_console_script_entry_point_calls_it_unpinned(tmp_path: Path) -> None:
    (tmp_path / "setup.py").write_text(
        "from setuptools import setup\n"
        "setup(entry_points={'console_scripts': ['train = src.train:main']})\n"
    )
    assert _gpf005(tmp_path, f"{PIN}\n{CALL}") == [7]


def test_a_caller_through_importlib_without_the_pin_keeps_the_finding(tmp_path: Path) -> None:
    (tmp_path / "evaluate.py").write_text(
        "import importlib\n\n\ndef run():\n    importlib.import_module('src.train').main(None)\n"
    )
    assert _gpf005(tmp_path, f"{PIN}\n{CALL}") == [7]


def test_a_reexport_from_a_package_init_keeps_the_finding(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("from .train import main\n")
    (tmp_path / "pkg" / "train.py").write_text(TRAIN.format(tail=""))
    launch = LAUNCH.replace("from src.train import", "from pkg.train import")
    (tmp_path / "main.py").write_text(launch.format(body=f"{PIN}\n{CALL}"))
    (tmp_path / "other.py").write_text("import pkg\n\n\ndef run():\n    pkg.main(None)\n")
    found = lint_paths([str(tmp_path)]).findings
    assert [f.line for f in found if f.rule == "GPF005"] == [7]
