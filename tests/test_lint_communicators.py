"""GPF003/GPF004/GPF010 and NCCL settings that cannot reach NCCL (communicators.py).

The single-GPU case is reduced from Nunpuking/LLM_Practice_Heo (my_pt_generate.py @fa6cdf1a):
a copied header turns P2P and IB off, then the script pins one GPU and generates, with no
process group, launcher or trainer; its training sibling builds a Trainer and stays reported.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from gpufix.workload.lint import lint_paths
from gpufix.workload.lint.communicators import load_table, parse_table

HEADER = textwrap.dedent("""\
    import os
    os.environ["CUDA_VISIBLE_DEVICES"] = "0"
    os.environ["NCCL_P2P_DISABLE"] = "1"
    os.environ["NCCL_IB_DISABLE"] = "1"
    os.environ["NCCL_DEBUG"] = "INFO"
    import torch
    from transformers import AutoModelForCausalLM, Trainer
""")
GENERATE = textwrap.dedent("""\
    model = AutoModelForCausalLM.from_pretrained("gpt2").to("cuda")
    print(model.generate(torch.tensor([[1, 2]]).to("cuda")))
""")


def _lint(tmp_path: Path, files: dict[str, str]) -> set[tuple[str, int, str]]:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    res = lint_paths([str(tmp_path)])
    return {(Path(f.path).name, f.line, f.rule) for f in res.findings}


def _knobs(found: set[tuple[str, int, str]], name: str) -> set[str]:
    return {r for f, _, r in found if f == name and r in ("GPF003", "GPF004", "GPF010")}


def test_single_gpu_script_knobs_are_inert(tmp_path: Path) -> None:
    found = _lint(tmp_path, {"generate.py": HEADER + GENERATE})
    assert _knobs(found, "generate.py") == set()


def test_a_trainer_or_process_group_makes_them_count(tmp_path: Path) -> None:
    found = _lint(
        tmp_path,
        {
            "train.py": HEADER + "trainer = Trainer(model=None)\ntrainer.train()\n",
            "ddp.py": HEADER
            + "import torch.distributed as dist\ndist.init_process_group('nccl')\n",
        },
    )
    assert _knobs(found, "train.py") == {"GPF003", "GPF004", "GPF010"}
    assert _knobs(found, "ddp.py") == {"GPF003", "GPF004", "GPF010"}


@pytest.mark.parametrize(
    "call",
    [
        "import subprocess\nsubprocess.run(['torchrun', 'train.py'])\n",
        "import torch.multiprocessing as mp\nmp.spawn(print, nprocs=2)\n",
        "import importlib\nimportlib.import_module(name)\n",
        "exec(code)\n",
        "net = torch.nn.DataParallel(model)\n",
    ],
)
def test_processes_dataparallel_and_unknown_modules_count(tmp_path: Path, call: str) -> None:
    found = _lint(tmp_path, {"s.py": HEADER + GENERATE + call})
    assert "GPF004" in _knobs(found, "s.py")


SETUP = "import torch.distributed as dist\ndef setup():\n    dist.init_process_group('nccl')\n"


@pytest.mark.parametrize(
    "files",
    [
        {"run.py": HEADER + "import helpers\nhelpers.setup()\n", "helpers.py": SETUP},
        # a package's re-export: run.py reaches utils/dist.py through utils/__init__.py
        {
            "run.py": HEADER + "import utils\nutils.setup()\n",
            "utils/__init__.py": "from utils.dist import setup\n",
            "utils/dist.py": SETUP,
        },
    ],
    ids=["helper", "re-export"],
)
def test_a_run_module_that_reaches_nccl_counts(tmp_path: Path, files: dict[str, str]) -> None:
    assert "GPF004" in _knobs(_lint(tmp_path, files), "run.py")


def test_a_run_module_that_does_not_leaves_them_inert(tmp_path: Path) -> None:
    quiet = _lint(
        tmp_path / "q",
        {
            "run.py": HEADER + "import data\ndata.load()\n",
            "data.py": "def load():\n    return []\n",
        },
    )
    assert _knobs(quiet, "run.py") == set()


def test_a_module_imported_by_the_run_counts(tmp_path: Path) -> None:
    # prime-rl's layout: src/pkg/utils has no __init__.py, the importer names pkg.utils.nccl
    found = _lint(
        tmp_path,
        {
            "src/pkg/utils/nccl.py": HEADER,
            "src/pkg/worker.py": "from pkg.utils.nccl import os\n",
        },
    )
    assert "GPF004" in _knobs(found, "nccl.py")


def test_a_sibling_scripts_plain_import_counts(tmp_path: Path) -> None:
    # pkg/gen.py (pkg has __init__.py) imported by pkg/run.py as `import gen`
    found = _lint(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/gen.py": HEADER,
            "pkg/run.py": "import gen\nimport torch.distributed as dist\n"
            "dist.init_process_group('nccl')\n",
        },
    )
    assert "GPF004" in _knobs(found, "gen.py")


def test_a_module_without_a_gpu_library_counts(tmp_path: Path) -> None:
    # a launcher or environment helper: its environment is for code it does not show
    helper = 'import os\ndef setup_env():\n    os.environ["NCCL_DEBUG"] = "INFO"\nsetup_env()\n'
    found = _lint(tmp_path, {"launch.py": helper})
    assert _knobs(found, "launch.py") == {"GPF003"}


def test_cuda_launch_blocking_is_not_an_nccl_setting(tmp_path: Path) -> None:
    text = HEADER + GENERATE + 'os.environ["CUDA_LAUNCH_BLOCKING"] = "1"\n'
    found = _lint(tmp_path, {"g.py": text})
    assert _knobs(found, "g.py") == {"GPF003"}
    assert {line for f, line, r in found if r == "GPF003"} == {10}


def test_table_rows_are_checked() -> None:
    table = load_table()
    assert "torch.distributed*" in table.calls and "tp_plan" in table.keywords
    for bad in (
        "communicators: []",
        "communicators: [{call: 'x y', source: 'https://a'}]",
        "communicators: [{call: 'x', source: 'http://a'}]",
        "communicators: [{call: 'x', source: 'https://a', extra: 1}]",
        "communicators: [{call: 'x', source: 'https://a'}, {call: 'x', source: 'https://b'}]",
        "communicators: [{keyword: 'a.b', source: 'https://a'}]",
        "communicators: [{call: 'x', keyword: 'y', source: 'https://a'}]",
    ):
        with pytest.raises(ValueError, match=r"communicators\.yaml"):
            parse_table(bad)


def test_without_one_pinned_gpu_the_settings_count(tmp_path: Path) -> None:
    # a script that calls a helper lint was not given (`gpufix lint train.py`): the helper may
    # start the process group, so only one pinned GPU makes the settings inert
    unpinned = HEADER.replace('os.environ["CUDA_VISIBLE_DEVICES"] = "0"\n', "")
    text = unpinned + "from utils.dist import init_distributed_mode\ninit_distributed_mode()\n"
    assert "GPF004" in _knobs(_lint(tmp_path, {"train.py": text}), "train.py")
    several = HEADER.replace('= "0"', '= "0,1"') + GENERATE
    assert "GPF004" in _knobs(_lint(tmp_path / "b", {"g.py": several}), "g.py")


@pytest.mark.parametrize(
    "extra",
    [
        "class Loop(Trainer):\n    pass\nLoop(model=None).train()\n",
        "model = AutoModelForCausalLM.from_pretrained('m', tp_plan='auto')\n",
        "import tensorflow as tf\nstrategy = tf.distribute.MirroredStrategy()\n",
    ],
)
def test_subclasses_tensor_parallel_and_other_frameworks_count(tmp_path: Path, extra: str) -> None:
    found = _lint(tmp_path, {"s.py": HEADER + extra})
    assert "GPF004" in _knobs(found, "s.py")


@pytest.mark.parametrize(
    "pin",
    [
        'os.environ.setdefault("CUDA_VISIBLE_DEVICES", "0")\n',  # a launcher's value wins
        'def main():\n    os.environ["CUDA_VISIBLE_DEVICES"] = "0"\n',
        'if __name__ == "__main__":\n    os.environ["CUDA_VISIBLE_DEVICES"] = "0"\n',
        'try:\n    os.environ["CUDA_VISIBLE_DEVICES"] = "0"\nexcept KeyError:\n    pass\n',
        'os.environ["CUDA_VISIBLE_DEVICES"] = "0"\nos.environ["CUDA_VISIBLE_DEVICES"] = "0,1"\n',
        'os.environ["CUDA_VISIBLE_DEVICES"] = "0"\ndel os.environ["CUDA_VISIBLE_DEVICES"]\n',
        'import torch\nos.environ["CUDA_VISIBLE_DEVICES"] = "0"\n',  # after CUDA may be up
    ],
)
def test_only_a_real_pin_at_the_top_counts(tmp_path: Path, pin: str) -> None:
    unpinned = HEADER.replace('os.environ["CUDA_VISIBLE_DEVICES"] = "0"\n', "")
    text = unpinned.replace("import os\n", "import os\n" + pin, 1) + GENERATE
    assert "GPF004" in _knobs(_lint(tmp_path, {"g.py": text}), "g.py")


@pytest.mark.parametrize(
    "use",
    [
        "from utils.dist import *\ninit_distributed_mode()\n",
        "import utils.dist\n",  # its import starts the group
    ],
)
def test_star_and_side_effect_imports_are_followed(tmp_path: Path, use: str) -> None:
    dist = (
        "import torch.distributed as dist\n"
        "def init_distributed_mode():\n    dist.init_process_group('nccl')\n"
        "init_distributed_mode()\n"
    )
    found = _lint(
        tmp_path, {"run.py": HEADER + use, "utils/__init__.py": "", "utils/dist.py": dist}
    )
    assert "GPF004" in _knobs(found, "run.py")
