"""GPF003 and TORCH_DISTRIBUTED_DEBUG: torch.distributed reads it once, at import, so a write
after `import torch` reaches only processes started afterwards (debuglevel.py)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from gpufix.workload.lint import lint_paths, lint_source


def _codes(src: str) -> list[tuple[int, str]]:
    return [(f.line, f.rule) for f in lint_source(textwrap.dedent(src), "t.py")]


def test_torch_reads_the_level_at_import_not_later() -> None:
    """What the exemption rests on, on the torch installed here (a fresh process each): `import
    torch` alone reads the level, so naming torch.distributed after the write changes nothing."""
    probe = textwrap.dedent(
        """
        import os
        if os.environ.get("EARLY"):
            os.environ["TORCH_DISTRIBUTED_DEBUG"] = "DETAIL"
        import torch
        os.environ["TORCH_DISTRIBUTED_DEBUG"] = "DETAIL"
        import torch.distributed as dist
        print(dist.get_debug_level())
        """
    )
    env = {"PATH": "/usr/bin:/bin"}
    late = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env)
    early = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env | {"EARLY": "1"}
    )
    assert late.stdout.strip() == "DebugLevel.OFF", late.stderr[-500:]
    assert early.stdout.strip() == "DebugLevel.DETAIL", early.stderr[-500:]


_PG = 'torch.distributed.init_process_group("nccl")\n'


@pytest.mark.parametrize(
    ("src", "expected"),
    [
        # a rank (it starts the group) that imported torch first: read already, nobody sees it
        ('import os\nimport torch\nos.environ["TORCH_DISTRIBUTED_DEBUG"] = "DETAIL"\n' + _PG, []),
        (
            "import os\nimport torch\nfrom torch import nn\n"
            'os.environ["TORCH_DISTRIBUTED_DEBUG"] = "INFO"\n' + _PG,
            [],
        ),
        (
            "import os\nimport torch\ndef setup():\n"
            '    os.environ["TORCH_DISTRIBUTED_DEBUG"] = "DETAIL"\n'
            '    torch.distributed.init_process_group("nccl")\n',
            [],
        ),
        (
            "import os\nimport torch\nimport deepspeed\n"
            'os.environ["TORCH_DISTRIBUTED_DEBUG"] = "DETAIL"\n'
            "deepspeed.init_distributed()\n",
            [],
        ),
        # before the import: every run takes it
        (
            'import os\nos.environ["TORCH_DISTRIBUTED_DEBUG"] = "DETAIL"\nimport torch\n' + _PG,
            [(2, "GPF003")],
        ),
        # torch imported only under a try: not read strictly as imported
        (
            "import os\ntry:\n    import torch\nexcept ImportError:\n    torch = None\n"
            'os.environ["TORCH_DISTRIBUTED_DEBUG"] = "DETAIL"\n' + _PG,
            [(6, "GPF003")],
        ),
        # not a rank itself: a library may re-run the script in each rank (Lightning, Catalyst),
        # where the inherited variable is read at import
        (
            "import os\nimport torch\nimport lightning\n"
            'os.environ["TORCH_DISTRIBUTED_DEBUG"] = "DETAIL"\n'
            'lightning.Trainer(strategy="ddp").fit(None)\n',
            [(4, "GPF003")],
        ),
        (
            "import os\nimport torch\nimport lightning\n"
            'os.environ["TORCH_DISTRIBUTED_DEBUG"] = "DETAIL"\n'
            'lightning.Fabric(strategy="ddp").launch()\n',
            [(4, "GPF003")],
        ),
        # the module starts processes that import torch again and read it (pytorch#70667's shape)
        (
            "import os\nimport torch\nimport torch.multiprocessing as mp\ndef worker(rank):\n"
            '    torch.distributed.init_process_group("nccl")\nif __name__ == "__main__":\n'
            '    os.environ["TORCH_DISTRIBUTED_DEBUG"] = "DETAIL"\n'
            "    mp.spawn(worker, nprocs=2)\n",
            [(7, "GPF003")],
        ),
        (
            "import os\nimport subprocess\nimport torch\n"
            'os.environ["TORCH_DISTRIBUTED_DEBUG"] = "DETAIL"\n'
            'subprocess.run(["torchrun", "train.py"])\n' + _PG,
            [(4, "GPF003")],
        ),
    ],
)
def test_a_write_after_import_torch_is_left_alone(
    src: str, expected: list[tuple[int, str]]
) -> None:
    assert _codes(src) == expected


def test_other_debug_knobs_are_unchanged() -> None:
    # NCCL reads NCCL_DEBUG when a communicator starts, CUDA CUDA_LAUNCH_BLOCKING when its
    # context does: after `import torch` they still take effect.
    src = """
        import os
        import torch
        os.environ["NCCL_DEBUG"] = "INFO"
        os.environ["CUDA_LAUNCH_BLOCKING"] = "1"
        torch.distributed.init_process_group("nccl")
        """
    assert [r for _, r in _codes(src)] == ["GPF003", "GPF003"]


def test_a_module_a_launcher_imports_keeps_the_finding(tmp_path: Path) -> None:
    # A review's shape: the launcher calls the helper's write, then starts the ranks, which
    # inherit the value and read it when they import torch.
    (tmp_path / "main.py").write_text(
        "import torch.multiprocessing as mp\n"
        "from dist_utils import setup_env, worker\n"
        'if __name__ == "__main__":\n'
        "    setup_env()\n"
        "    mp.spawn(worker, nprocs=2)\n"
    )
    (tmp_path / "dist_utils.py").write_text(
        "import os\nimport torch\nimport torch.distributed as dist\n"
        "def setup_env():\n"
        '    os.environ["TORCH_DISTRIBUTED_DEBUG"] = "DETAIL"\n'
        "def worker(rank):\n"
        '    dist.init_process_group("nccl", rank=rank, world_size=2)\n'
    )
    found = lint_paths([str(tmp_path)]).findings
    assert [(Path(f.path).name, f.line, f.rule) for f in found if f.rule == "GPF003"] == [
        ("dist_utils.py", 5, "GPF003")
    ]


def _debug_lines(tmp_path: Path) -> list[tuple[str, int]]:
    found = lint_paths([str(tmp_path)]).findings
    return [(Path(f.path).name, f.line) for f in found if f.rule == "GPF003"]


def test_a_write_in_the_function_that_builds_the_rank_is_left_alone(tmp_path: Path) -> None:
    # ai-generated-ai's shape: the spawn target writes the level, then wraps DDP; it runs in the
    # children, which imported torch with this module. The module spawns, the function does not.
    (tmp_path / "train.py").write_text(
        "import os\nimport torch\nimport torch.multiprocessing as mp\n"
        "from torch.nn.parallel import DistributedDataParallel as DDP\n"
        "def train(rank):\n"
        "    if rank == 0:\n"
        '        os.environ["TORCH_DISTRIBUTED_DEBUG"] = "DETAIL"\n'
        "    model = DDP(torch.nn.Linear(2, 2).cuda(rank), device_ids=[rank])\n"
        'if __name__ == "__main__":\n'
        "    mp.spawn(train, nprocs=2)\n"
    )
    assert _debug_lines(tmp_path) == []


@pytest.mark.parametrize(
    "body",
    [
        # the function starts a process after the write: the child reads it at import
        '    dist.init_process_group("gloo")\n    subprocess.run(["torchrun", "train.py"])\n',
        # the group starts only in a function defined inside it, which may never run
        '    def inner():\n        dist.init_process_group("nccl")\n    return inner\n',
        # no rank built here: a launcher's helper
        "    return None\n",
    ],
)
def test_a_function_that_is_not_the_rank_keeps_the_finding(tmp_path: Path, body: str) -> None:
    (tmp_path / "main.py").write_text("from helpers import setup\nsetup()\n")
    (tmp_path / "helpers.py").write_text(
        "import os, subprocess, torch\nimport torch.distributed as dist\n"
        "def setup():\n"
        '    os.environ["TORCH_DISTRIBUTED_DEBUG"] = "DETAIL"\n' + body
    )
    assert _debug_lines(tmp_path) == [("helpers.py", 4)]


_HEAD = "import os\nimport torch\nimport torch.distributed as dist\nimport torch.multiprocessing as mp\n"
_W = 'os.environ["TORCH_DISTRIBUTED_DEBUG"] = "DETAIL"'


@pytest.mark.parametrize(
    ("train", "line"),
    [
        # a review's shapes (2026-12-04): the caller starts ranks after the function returns
        (
            _HEAD + f"def coordinator():\n    {_W}\n"
            '    dist.init_process_group("gloo", world_size=2, rank=0)\n'
            'if __name__ == "__main__":\n    coordinator()\n    mp.spawn(print, nprocs=2)\n',
            6,
        ),
        # the group starts only on a branch the write does not take
        (
            _HEAD + f"def setup(rank=None):\n    {_W}\n    if rank is not None:\n"
            '        dist.init_process_group("nccl")\n',
            6,
        ),
        # a one-line nested def: the write runs in `inner`, whenever its caller calls it
        (
            _HEAD + f"def outer():\n    def inner(): {_W}\n"
            '    dist.init_process_group("gloo")\n    return inner\n',
            6,
        ),
        # in a lambda, or a default argument (evaluated when the module runs its def)
        (
            _HEAD + "def outer():\n"
            '    on = lambda: os.environ.update(TORCH_DISTRIBUTED_DEBUG="DETAIL")\n'
            '    dist.init_process_group("gloo")\n    return on\n',
            6,
        ),
        (
            _HEAD
            + 'def train(rank, level=os.environ.setdefault("TORCH_DISTRIBUTED_DEBUG", "DETAIL")):\n'
            '    dist.init_process_group("nccl")\n',
            5,
        ),
        # torch is asked to read the variable again
        (
            _HEAD + f"def setup():\n    {_W}\n    dist.set_debug_level_from_env()\n"
            '    dist.init_process_group("nccl")\n',
            6,
        ),
        # a group of one rank is a self-test, not the rank
        (
            _HEAD + f"def check():\n    {_W}\n"
            '    dist.init_process_group("gloo", world_size=1, rank=0)\n',
            6,
        ),
        # torch imported below the function: read strictly, not imported yet
        (
            "import os\n" + f"def setup():\n    {_W}\n"
            '    torch.distributed.init_process_group("nccl")\nimport torch\n',
            3,
        ),
    ],
)
def test_a_rank_function_the_run_may_outlive_keeps_the_finding(
    tmp_path: Path, train: str, line: int
) -> None:
    (tmp_path / "main.py").write_text("import train\n")
    (tmp_path / "train.py").write_text(train)
    assert _debug_lines(tmp_path) == [("train.py", line)]


def test_a_launcher_that_spawns_the_same_function_leaves_it_alone(tmp_path: Path) -> None:
    # ai-generated-ai: launch_distributed.py imports train() and spawns it; a launcher that
    # spawns another target may have called the write first.
    (tmp_path / "train.py").write_text(
        _HEAD + f"def train(rank):\n    {_W}\n"
        '    dist.init_process_group("nccl")\n'
        "def other(rank):\n    pass\n"
    )
    (tmp_path / "launch.py").write_text(
        "import torch.multiprocessing as mp\nfrom train import train\nmp.spawn(train, nprocs=2)\n"
    )
    assert _debug_lines(tmp_path) == []
    (tmp_path / "launch.py").write_text(
        "import torch.multiprocessing as mp\nfrom train import other\nmp.spawn(other, nprocs=2)\n"
    )
    assert _debug_lines(tmp_path) == [("train.py", 6)]


def test_a_rank_built_on_the_writes_own_branch_is_left_alone(tmp_path: Path) -> None:
    # subjectmotion's launch_training_task(): the training scripts import the helper, whose
    # function writes the level and builds its Accelerator under the same `if`: the caller is
    # the rank itself, after import torch.
    (tmp_path / "main.py").write_text("from helpers import launch\nlaunch('Motion')\n")
    (tmp_path / "helpers.py").write_text(
        "import os, torch\nfrom accelerate import Accelerator\n"
        "def launch(kind):\n"
        "    if kind == 'Motion':\n"
        f"        {_W}\n"
        "        accelerator = Accelerator(log_with='wandb')\n"
        "    else:\n"
        "        accelerator = Accelerator()\n"
    )
    assert _debug_lines(tmp_path) == []


def test_a_launcher_two_imports_away_that_spawns_another_target_keeps_the_finding(
    tmp_path: Path,
) -> None:
    # The launcher imports a package module that imports the helper: it may call the write
    # through it, then start processes that read the inherited value at their import.
    (tmp_path / "train.py").write_text(
        _HEAD + f"def train(rank):\n    {_W}\n"
        '    dist.init_process_group("nccl")\n'
        "def other(rank):\n    pass\n"
    )
    (tmp_path / "steps.py").write_text("from train import train, other\n")
    (tmp_path / "launch.py").write_text(
        "import torch.multiprocessing as mp\nimport steps\nmp.spawn(steps.other, nprocs=2)\n"
    )
    assert _debug_lines(tmp_path) == [("train.py", 6)]
    (tmp_path / "launch.py").write_text("import steps\nsteps.train(0)\n")
    assert _debug_lines(tmp_path) == []
