"""A process-group helper nothing calls does not make a script multi-rank (unused.py). Reduced
from the eighth precision set: eval.py keeps a `setup_ddp()` it never calls and runs in one
process, so its `torch.load` cannot land on another rank's GPU (judged FP)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from gpufix.workload.lint import lint_paths

SCRIPT = """\
import torch
import torch.distributed as dist


{decorator}def setup_ddp(rank, world_size):
    dist.init_process_group("nccl", rank=rank, world_size=world_size)


def main():
    {call}
    state = torch.load("ckpt.pt")
    return state
{main_block}"""
MAIN = '\n\nif __name__ == "__main__":\n    main()\n'


def _rules(tmp_path: Path, **parts: str) -> list[str]:
    fields = {"decorator": "", "call": "pass", "main_block": MAIN, **parts}
    (tmp_path / "eval.py").write_text(SCRIPT.format(**fields))
    return [f.rule for f in lint_paths([str(tmp_path)]).findings]


def test_a_script_that_never_calls_its_group_helper_is_one_process(tmp_path: Path) -> None:
    assert _rules(tmp_path) == []


def test_a_script_that_calls_it_is_multi_rank(tmp_path: Path) -> None:
    assert _rules(tmp_path, call="setup_ddp(0, 2)") == ["GPF008"]


@pytest.mark.parametrize(
    "parts",
    [
        {"main_block": ""},  # a library: code outside the run may call it
        {"decorator": "@register\n"},  # used through its decorator (a registry, a CLI)
        {"call": 'getattr(__import__("eval"), "setup_ddp")'},  # named in a string
    ],
    ids=["library", "decorated", "string"],
)
def test_helpers_that_may_be_used_count_as_used(tmp_path: Path, parts: dict[str, str]) -> None:
    assert _rules(tmp_path, **parts) == ["GPF008"]


@pytest.mark.parametrize(
    "call",
    [
        "fire.Fire()",  # every function of the module is a command
        'globals()["setup_" + "ddp"](0, 2)',  # looked up at run time
        'eval("setup_" + "ddp")(0, 2)',
        "import hydra",  # a config's `_target_: eval.setup_ddp`
    ],
    ids=["fire", "globals", "eval", "hydra"],
)
def test_modules_that_look_functions_up_count_as_using_them(tmp_path: Path, call: str) -> None:
    assert _rules(tmp_path, call=f"import fire\n    {call}") == ["GPF008"]


def test_an_entry_point_in_pyproject_counts(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project.scripts]\nev = "eval:setup_ddp"\n')
    assert _rules(tmp_path) == ["GPF008"]


@pytest.mark.parametrize(
    "importer",
    [
        "from tools.eval import setup_ddp\n\nsetup_ddp(0, 2)\n",  # a folder without __init__
        'import importlib\n\nimportlib.import_module("eval").setup_ddp(0, 2)\n',
    ],
    ids=["namespace-package", "import_module"],
)
def test_importers_by_other_paths_count(tmp_path: Path, importer: str) -> None:
    (tmp_path / "launch.py").write_text(importer)
    assert _rules(tmp_path) == ["GPF008"]


def test_a_class_is_never_taken_for_unused(tmp_path: Path) -> None:
    (tmp_path / "eval.py").write_text(
        "import torch\nimport torch.distributed as dist\n\n\nclass Worker:\n"
        "    def run(self):\n        dist.init_process_group('nccl')\n"
        "        return torch.load('ckpt.pt')\n\n\nif __name__ == '__main__':\n    pass\n"
    )
    assert [f.rule for f in lint_paths([str(tmp_path)]).findings] == ["GPF008"]


def test_an_importer_in_the_run_that_names_it_counts(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("from eval import setup_ddp\n\nsetup_ddp(0, 2)\n")
    assert _rules(tmp_path) == ["GPF008"]


def test_another_scripts_own_helper_of_the_same_name_does_not(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(
        "def setup_ddp(rank, world_size):\n    pass\n\n\nsetup_ddp(0, 2)\n"
    )
    assert _rules(tmp_path) == []


def test_named_in_a_string_counts(tmp_path: Path) -> None:
    assert _rules(tmp_path, call='__all__ = ["setup_ddp"]') == ["GPF008"]


def test_an_entry_point_above_the_scripts_folder_counts(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project.scripts]\nev = "pkg.eval:setup_ddp"\n')
    (tmp_path / "pkg").mkdir()
    assert _rules(tmp_path / "pkg") == ["GPF008"]


def test_packaging_files_are_data_read_inside_the_project_only(tmp_path: Path) -> None:
    # A FIFO named pyproject.toml is not opened (no hang); nothing above the project's root
    # (the first folder with a packaging file) is read, so a file there names no entry point.
    (tmp_path / "pyproject.toml").write_text('[project.scripts]\nev = "eval:setup_ddp"\n')
    project = tmp_path / "proj"
    project.mkdir()
    (project / "setup.cfg").write_text("[metadata]\nname = proj\n")
    os.mkfifo(project / "pyproject.toml")
    assert _rules(project) == []
