"""GPF005 in a function its callers run after pinning the process to one GPU (callerpin.py).

Reduced from I-JEPA's launcher (facebookresearch/ijepa main.py): process_main(rank) sets
CUDA_VISIBLE_DEVICES to devices[rank], then calls src.train.main, which uses cuda:0. The
training module sits in `src/` without an __init__.py (a namespace package)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
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
    (tmp_path / "src").mkdir(exist_ok=True)
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


# A review's shapes (2026-12-02): each one an unpinned way into `main` or a pin that does not
# hold, next to the pinned launcher; the finding must stay (the reading fails closed).
CLI = "{imports}\n\n\ndef run():\n    {call}\n\n\nif __name__ == '__main__':\n    run()\n"
UNPINNED = {
    "a name bound twice (two imports of `main`)": {
        "cli.py": "def train(a):\n    from src.train import main\n    main(a)\n\n\n"
        "def evaluate(a):\n    from src.eval import main\n    main(a)\n",
        "src/eval.py": "def main(args):\n    return args\n",
    },
    "a star import": {"cli.py": CLI.format(imports="from src.train import *", call="main(None)")},
    "a re-export in a plain module": {
        "common.py": "from src.train import main\n",
        "cli.py": CLI.format(imports="from common import main", call="main(None)"),
    },
    "an import through sys.path": {
        "tools/finetune.py": CLI.format(
            imports="import sys\nsys.path.insert(0, 'src')\nfrom train import main",
            call="main(None)",
        )
    },
    "getattr by a computed name": {
        "other.py": "import importlib\n\n\ndef run(name):\n"
        "    getattr(importlib.import_module('src.train'), name)(None)\n"
    },
    "exec": {"other.py": "def run():\n    exec('from src.train import main; main(None)')\n"},
}


@pytest.mark.parametrize("files", list(UNPINNED.values()), ids=list(UNPINNED))
def test_an_unresolved_way_in_keeps_the_finding(tmp_path: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    assert _gpf005(tmp_path, f"{PIN}\n{CALL}") == [7]


BAD_PINS = {
    "a setdefault (a launcher's value wins)": (
        "    os.environ.setdefault('CUDA_VISIBLE_DEVICES', str(devices[rank]))"
    ),
    "a value the same on every rank": "    os.environ['CUDA_VISIBLE_DEVICES'] = os.environ['GPU']",
    "deleted again": f"{PIN}\n    del os.environ['CUDA_VISIBLE_DEVICES']",
    "CUDA started before the write": f"    torch_init()\n{PIN}",
}


@pytest.mark.parametrize("pin", list(BAD_PINS.values()), ids=list(BAD_PINS))
def test_a_pin_that_does_not_hold_keeps_the_finding(tmp_path: Path, pin: str) -> None:
    assert _gpf005(tmp_path, f"{pin}\n{CALL}") == [7]


@pytest.mark.parametrize(
    "start",
    [
        "threading.Thread(target=process_main, args=(rank, devices)).start()",
        "process_main(rank, devices)",  # one process runs every rank's pin in turn
    ],
    ids=["threads", "a loop in one process"],
)
def test_a_pin_that_runs_more_than_once_per_process_keeps_the_finding(
    tmp_path: Path, start: str
) -> None:
    launch = "import threading\n" + LAUNCH.replace(
        "mp.Process(target=process_main, args=(rank, devices)).start()", start
    )
    assert _gpf005(tmp_path, f"{PIN}\n{CALL}", launch=launch) == [7]


def test_a_decorated_main_keeps_the_finding(tmp_path: Path) -> None:
    # @hydra.main supplies the arguments: a bare `main()` under __main__ does run it
    (tmp_path / "src").mkdir()
    train = "import hydra\n" + TRAIN.format(tail='\n\nif __name__ == "__main__":\n    main()\n')
    train = train.replace("def main(args):", "@hydra.main(config_path='conf')\ndef main(args):")
    (tmp_path / "src" / "train.py").write_text(train)
    (tmp_path / "main.py").write_text(LAUNCH.format(body=f"{PIN}\n{CALL}"))
    found = lint_paths([str(tmp_path)]).findings
    assert [f.line for f in found if f.rule == "GPF005"] == [9]


# A second review's shapes.
def test_more_ways_in_that_keep_the_finding(tmp_path: Path) -> None:
    cases = {
        "getattr by a computed name": (
            "import sys\nimport src.train as tasks\n\n\ndef run():\n"
            "    getattr(tasks, sys.argv[1])(None)\n"
        ),
        "a dict of the module": (
            "import src.train as tasks\n\n\ndef run():\n    vars(tasks)['main'](None)\n"
        ),
    }
    for name, text in cases.items():
        d = tmp_path / name.replace(" ", "_")
        d.mkdir()
        (d / "other.py").write_text(text)
        assert _gpf005(d, f"{PIN}\n{CALL}") == [7], name


@pytest.mark.parametrize(
    "start",
    [
        "for rank in range(2):\n        helper(rank, devices)",  # the helper runs in a loop
        "process_main(0, devices)\n    process_main(1, devices)",  # two calls, one process
    ],
    ids=["through a helper in a loop", "two calls"],
)
def test_the_pinning_function_called_twice_keeps_the_finding(tmp_path: Path, start: str) -> None:
    launch = LAUNCH.replace(
        "    for rank in range(len(devices)):\n"
        "        mp.Process(target=process_main, args=(rank, devices)).start()",
        f"    {start}",
    )
    launch += "\n\ndef helper(rank, devices):\n    process_main(rank, devices)\n"
    assert _gpf005(tmp_path, f"{PIN}\n{CALL}", launch=launch) == [7]


def test_a_value_the_same_for_every_rank_keeps_the_finding(tmp_path: Path) -> None:
    # built from a parameter, but not indexed by it: mp.spawn hands every rank "0,1"
    body = f"    os.environ['CUDA_VISIBLE_DEVICES'] = str(devices)\n{CALL}"
    assert _gpf005(tmp_path, body) == [7]


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("pyproject.toml", '[project.scripts]\ntrain = "src.train:main"\n'),
        ("setup.cfg", "[options.entry_points]\nconsole_scripts =\n    train = src.train : main\n"),
        ("configs/run.yaml", "job:\n  _target_: src.train.main\n"),
        ("demo.ipynb", '{"cells": [{"source": ["from src.train import main as run\\n"]}]}'),
        ("jobs/train.sbatch", "#!/bin/bash\n#SBATCH -N 2\nsrun python -m src.train main\n"),
        ("jobs/train.slurm", "srun python -c 'from src.train import main; main(None)'\n"),
        ("src.egg-info/entry_points.txt", "[console_scripts]\ntrain = src.train:main\n"),
    ],
)
def test_a_file_around_the_code_that_names_it_keeps_the_finding(
    tmp_path: Path, name: str, text: str
) -> None:
    """A console script, a config target or a notebook calls it without the launcher's pin."""
    (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / name).write_text(text)
    assert _gpf005(tmp_path, f"{PIN}\n{CALL}") == [7]


def test_files_around_it_that_name_other_things_leave_the_pin(tmp_path: Path) -> None:
    """`python main.py` in a launcher and `main:` keys name the word, but no file names the
    module (`train`) beside it, as in I-JEPA's own launchers and configs."""
    (tmp_path / "run.sh").write_text("python main.py --fname configs/in1k.yaml\n")
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "in1k.yaml").write_text("main:\n  epochs: 300\nmeta:\n  main: 1\n")
    (tmp_path / "configs" / "data.yaml").write_text("split: train\n")
    assert _gpf005(tmp_path, f"{PIN}\n{CALL}") == []


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("demo.ipynb", '{"cells": [{"source": ["import src.train as tr\\n", "tr.main(None)"]}]}'),
        ("demo2.ipynb", '{"cells": [{"source": ["from src.train import (\\n", "    main,\\n)"]}]}'),
        ("run.sh", 'python -c "import src.train as t; t.main(None)"\n'),
        (
            "setup.py",
            "from setuptools import setup\nsetup(entry_points={'console_scripts': ['t = src.train : main']})\n",
        ),
    ],
)
def test_other_forms_that_name_the_module_and_the_function_keep_the_finding(
    tmp_path: Path, name: str, text: str
) -> None:
    """The second review's forms: an aliased import, a parenthesised import, `python -c`, an
    entry point with spaces around the colon."""
    (tmp_path / name).write_text(text)
    assert _gpf005(tmp_path, f"{PIN}\n{CALL}") == [7]


def test_files_around_it_too_many_to_read_keep_the_finding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpufix.workload.lint import sidefiles

    monkeypatch.setattr(sidefiles, "_MAX_FILES", 1)
    for i in range(3):
        (tmp_path / f"job{i}.sh").write_text("echo\n")
    assert _gpf005(tmp_path, f"{PIN}\n{CALL}") == [7]
