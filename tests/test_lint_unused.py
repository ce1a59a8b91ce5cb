"""A process-group helper nothing calls does not make a script multi-rank (unused.py). Reduced
from the eighth precision set: eval.py keeps a `setup_ddp()` it never calls and runs in one
process, so its `torch.load` cannot land on another rank's GPU (judged FP)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from gpufix.workload.lint import lint_paths
from gpufix.workload.lint.config import LintConfig

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
        {"decorator": "@register\n"},  # used through its decorator (a registry, a CLI)
        {"call": 'getattr(__import__("eval"), "setup_ddp")'},  # named in a string
    ],
    ids=["decorated", "string"],
)
def test_helpers_that_may_be_used_count_as_used(tmp_path: Path, parts: dict[str, str]) -> None:
    assert _rules(tmp_path, **parts) == ["GPF008"]


def test_a_packaged_librarys_module_counts_as_used(tmp_path: Path) -> None:
    # no __main__ block and a pyproject.toml: code outside the run may import and call it
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "ev"\n')
    assert _rules(tmp_path, main_block="") == ["GPF008"]


def test_an_applications_module_helper_nothing_uses_is_unused(tmp_path: Path) -> None:
    # no packaging and lint given the directory: only the run's files could call it
    assert _rules(tmp_path, main_block="") == []


def test_a_file_list_is_not_the_whole_project(tmp_path: Path) -> None:
    # pre-commit passes the changed files: their callers may be elsewhere
    (tmp_path / "eval.py").write_text(SCRIPT.format(decorator="", call="pass", main_block=""))
    assert [f.rule for f in lint_paths([str(tmp_path / "eval.py")]).findings] == ["GPF008"]


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


def test_a_scripts_class_is_never_taken_for_unused(tmp_path: Path) -> None:
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


# -- dead helpers in an application's modules (ninth precision set: PSF, stableGAN; VVC-GFVC) --
HELPER = """\
import os

import torch


def set_gpu_env(gpus):
    os.environ["CUDA_VISIBLE_DEVICES"] = gpus
"""
NET = """\
import torch
from torch import nn


class Generator(nn.Module):
    def __init__(self, ngpu):
        super(Generator, self).__init__()
        self.ngpu, self.main = ngpu, nn.Linear(4, 4)

    def forward(self, x):
        return nn.parallel.data_parallel(self.main, x, range(self.ngpu))
"""


def _found(tmp_path: Path, files: dict[str, str], rule: str) -> list[int]:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return [f.line for f in lint_paths([str(tmp_path)]).findings if f.rule == rule]


@pytest.mark.parametrize(
    ("importer", "reported"),
    [
        ("", False),  # nothing imports the module
        ("from utils import set_gpu_env\n", False),  # imported, never called (VVC-GFVC)
        ("from utils import *\n", False),  # star-imported by scripts that never call it (PSF)
        ("from utils import *\n\nset_gpu_env('1')\n", True),
        ("from utils import set_gpu_env as pick\n\npick('1')\n", True),
        ("import utils\n\nutils.set_gpu_env('1')\n", True),
        ("import utils\n\nCALLS = {'gpu': 'set_gpu_env'}\n", True),  # named in a string
        ("import utils\n\ngetattr(utils, name)('1')\n", True),  # looked up at run time
        ("from other import set_gpu_env\n\nset_gpu_env('1')\n", False),  # another one's
    ],
)
def test_an_application_helper_is_used_only_when_a_file_uses_it(
    tmp_path: Path, importer: str, reported: bool
) -> None:
    files = {"utils.py": HELPER, "run.py": importer}
    assert _found(tmp_path, files, "GPF001") == ([7] if reported else [])


@pytest.mark.parametrize(
    "beside",
    [
        ("notebook.ipynb", '{"cells": [{"source": ["utils.set_gpu_env(\\"1\\")"]}]}'),
        ("launch.sh", "python -c 'import utils; utils.set_gpu_env(\"1\")'\n"),
        ("config.yaml", "setup:\n  _target_: utils.set_gpu_env\n"),
    ],
    ids=["notebook", "shell", "config"],
)
def test_a_helper_named_beside_the_code_is_used(tmp_path: Path, beside: tuple[str, str]) -> None:
    assert _found(tmp_path, {"utils.py": HELPER, beside[0]: beside[1]}, "GPF001") == [7]


def test_a_packaged_projects_helper_is_left_to_its_users(tmp_path: Path) -> None:
    files = {"utils.py": HELPER, "setup.py": "from setuptools import setup\nsetup(name='u')\n"}
    assert _found(tmp_path, files, "GPF001") == [7]


def test_a_class_nothing_instantiates_is_unused_whatever_it_says_of_itself(
    tmp_path: Path,
) -> None:
    # stableGAN's mogdata.py: `super(_netG, self)` names the class inside itself only; the
    # scripts use DCGAN.py's class of the same name
    run = "from dcgan import Generator\n\nGenerator(2)\n"
    dcgan = "class Generator:\n    def __init__(self, n):\n        self.n = n\n"
    files = {"mogdata.py": NET, "dcgan.py": dcgan, "run.py": run}
    assert _found(tmp_path, files, "GPF002") == []
    (tmp_path / "run.py").write_text("from mogdata import Generator\n\nGenerator(2)(None)\n")
    assert _found(tmp_path, {}, "GPF002") == [11]


def test_a_model_eval_call_is_no_run_time_lookup(tmp_path: Path) -> None:
    # `.eval()` is a method; only the builtin eval( makes every function reachable
    assert _found(tmp_path, {"utils.py": HELPER + "\n\nmodel.eval()\n"}, "GPF001") == []
    assert _found(tmp_path, {"utils.py": HELPER + "\n\neval('x')\n"}, "GPF001") == [7]


# -- a review's shapes (2026-12-02): real uses the first version missed, and hostile files --
DIST = """\
import torch
import torch.distributed as dist


def setup_ddp(rank, world):
    dist.init_process_group("nccl", rank=rank, world_size=world)
    return torch.nn.Linear(2, 2).cuda(0)
"""


def _gpf005(root: Path, files: dict[str, str], target: Path | None = None) -> list[str]:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    found = lint_paths([str(target or root)]).findings
    return [Path(f.path).name for f in found if f.rule == "GPF005"]


@pytest.mark.parametrize(
    "train",
    [
        "from utils import setup_ddp\n\nsetup_ddp(0, 2)\n",  # re-exported by the package
        "from utils import (\n    dist,\n    log,\n)\n\ndist.setup_ddp(0, 2)\n",  # black's style
        "import sys\n\nimport utils.dist as d\n\nfn = d.__dict__[sys.argv[1]]\n",
        "import utils.dist as d\n\nfn = vars(d)['setup_' + 'ddp']\n",
        "import inspect\n\nimport utils.dist as d\n\nfns = dict(inspect.getmembers(d))\n",
        "import fire\n\nimport utils.dist as d\n\nfire.Fire(d)\n",
    ],
    ids=["package-reexport", "multi-line-import", "__dict__", "vars", "getmembers", "fire"],
)
def test_uses_from_other_files_the_first_version_missed(tmp_path: Path, train: str) -> None:
    files = {
        "utils/__init__.py": "from .dist import setup_ddp\n",
        "utils/dist.py": DIST,
        "utils/log.py": "",
        "train.py": train,
    }
    assert _gpf005(tmp_path, files) == ["dist.py"]


@pytest.mark.parametrize(
    ("where", "text"),
    [
        ("notebooks/run.ipynb", '{"cells": [{"source": ["ddp_utils.setup_ddp(0, 2)"]}]}'),
        ("Makefile", "run:\n\tpython -c 'import ddp_utils; ddp_utils.setup_ddp(0, 2)'\n"),
        ("scripts/launch.sh", "python -c 'from ddp_utils import setup_ddp; setup_ddp(0, 2)'\n"),
    ],
    ids=["notebook-in-a-subfolder", "makefile", "shell-in-a-subfolder"],
)
def test_callers_around_the_code_count(tmp_path: Path, where: str, text: str) -> None:
    files = {"ddp_utils.py": DIST, "main.py": "print(1)\n", where: text}
    assert _gpf005(tmp_path, files) == ["ddp_utils.py"]


def test_a_notebook_with_megabytes_of_output_before_the_call_counts(tmp_path: Path) -> None:
    cells = '{"cells": [{"outputs": ["' + "A" * (2 << 20) + '"]}, {"source": ["setup_ddp(0, 2)"]}]}'
    files = {"ddp_utils.py": DIST, "main.py": "print(1)\n", "run.ipynb": cells}
    assert _gpf005(tmp_path, files) == ["ddp_utils.py"]


def test_hydra_anywhere_in_the_run_may_name_any_function(tmp_path: Path) -> None:
    files = {
        "ddp_utils.py": DIST,
        "main.py": "import hydra\n\n\n@hydra.main(config_path='configs')\ndef main(cfg):\n    pass\n",
        "configs/config.yaml": "setup:\n  _target_: ddp_utils.setup_ddp\n",
    }
    assert _gpf005(tmp_path, files) == ["ddp_utils.py"]
    (tmp_path / "configs" / "config.yaml").unlink()
    assert _gpf005(tmp_path, {}) == ["ddp_utils.py"]  # the import alone is enough


def test_a_folder_of_a_larger_project_is_not_the_whole_project(tmp_path: Path) -> None:
    files = {"src/ddp_utils.py": DIST, "train.py": "from src.ddp_utils import setup_ddp\n"}
    assert _gpf005(tmp_path, files, tmp_path / "src") == ["ddp_utils.py"]
    # the same folder with nothing around it is a project of its own: the helper is dead
    (tmp_path / "train.py").unlink()
    assert _gpf005(tmp_path, {}, tmp_path / "src") == []
    # and a checkout (`.git`) is one whatever its parent holds
    (tmp_path / "train.py").write_text("print(1)\n")
    (tmp_path / "src" / ".git").mkdir()
    assert _gpf005(tmp_path, {}, tmp_path / "src") == []


def test_a_pytest_function_is_called_by_pytest(tmp_path: Path) -> None:
    test = DIST.replace("def setup_ddp(rank, world)", "def test_allreduce(rank=0, world=2)")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_ddp.py").write_text(test)
    found = lint_paths([str(tmp_path)], LintConfig(tmp_path, contexts={"test": "as-is"}))
    assert [f.rule for f in found.findings] == ["GPF005"]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_hostile_files_around_the_code_are_never_read_whole_or_waited_on(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "a.yml")  # a reader that opened it would wait for a writer forever
    os.symlink("/dev/zero", tmp_path / "b.json")
    (tmp_path / "c.json").mkdir()
    files = {"ddp_utils.py": DIST, "main.py": "print(1)\n", "z.sh": "python -c 'setup_ddp(0, 2)'"}
    assert _gpf005(tmp_path, files) == ["ddp_utils.py"]  # z.sh is still read after them


def test_too_many_files_around_the_code_means_any_name_may_be_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpufix.workload.lint import sidefiles

    monkeypatch.setattr(sidefiles, "_MAX_FILES", 3)
    for n in range(5):
        (tmp_path / f"label_{n}.json").write_text("{}")
    assert _gpf005(tmp_path, {"ddp_utils.py": DIST, "main.py": "print(1)\n"}) == ["ddp_utils.py"]
    monkeypatch.setattr(sidefiles, "_MAX_FILES", 100)
    assert _gpf005(tmp_path, {}) == []
