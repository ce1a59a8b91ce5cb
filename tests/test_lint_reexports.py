"""GPF001 through a package's `__init__`, an import alias and keys built from parts (a review,
2026-12-05). A helper in `utils/gpu.py` that sets CUDA_VISIBLE_DEVICES, called after `import
torch` by a script that imports it from the package (`from utils import set_gpus`, the commonest
layout) or under another name, was never reported; GPF008 already followed such re-exports."""

from __future__ import annotations

from pathlib import Path

import pytest
from gpufix.workload.lint import lint_paths

HELPER = "import os\ndef set_gpus(ids):\n    os.environ['CUDA_VISIBLE_DEVICES'] = ids\n"


def _late(tmp_path: Path, init: str, script: str) -> list[tuple[str, str, int]]:
    (tmp_path / "utils").mkdir()
    (tmp_path / "utils" / "__init__.py").write_text(init)
    (tmp_path / "utils" / "gpu.py").write_text(HELPER)
    (tmp_path / "utils" / "other.py").write_text("def unrelated():\n    pass\n")
    (tmp_path / "train.py").write_text(script)
    found = lint_paths([str(tmp_path)]).findings
    return [(Path(f.path).relative_to(tmp_path).as_posix(), f.rule, f.line) for f in found]


LATE = "import torch\nfrom utils import set_gpus\ndef main():\n    set_gpus('0')\nmain()\n"


@pytest.mark.parametrize(
    "init",
    [
        "from .gpu import set_gpus\n",
        "from utils.gpu import set_gpus\n",
        "from .gpu import *\n",
        "from utils.gpu import *\n",
        "import os\nfrom .other import *\nfrom .gpu import *\n",
    ],
)
def test_a_helper_the_package_re_exports_is_followed(tmp_path: Path, init: str) -> None:
    assert _late(tmp_path, init, LATE) == [("utils/gpu.py", "GPF001", 3)]


def test_a_package_that_does_not_re_export_it_is_not_a_path(tmp_path: Path) -> None:
    # `from . import gpu` binds utils.gpu, not utils.set_gpus: the script's import would fail
    assert _late(tmp_path, "from . import gpu\n", LATE) == []


def test_on_time_through_the_package_is_quiet(tmp_path: Path) -> None:
    on_time = "from utils import set_gpus\nset_gpus('0')\nimport torch\n"
    assert _late(tmp_path, "from .gpu import *\n", on_time) == []


@pytest.mark.parametrize(
    "entry",
    [
        "import threading\nthreading.Thread(target=train).start()\n",
        "import fire\nfire.Fire({'train': train})\n",
        "train()\n",
    ],
)
def test_a_helper_imported_under_another_name_is_followed(tmp_path: Path, entry: str) -> None:
    script = (
        "import torch\nfrom utils.gpu import set_gpus as sg\n"
        "def train(gpus='0'):\n    sg(gpus)\n" + entry
    )
    assert _late(tmp_path, "", script) == [("utils/gpu.py", "GPF001", 3)]


@pytest.mark.parametrize(
    "key",
    [
        '"CUDA_VISIBLE_" + "DEVICES"',
        'f"CUDA_VISIBLE_{D}"',
        '"CUDA_" + V + "_DEVICES"',
        '"CUDA_DEVICE_" + "ORDER"',
    ],
)
def test_a_key_built_from_parts_is_read(tmp_path: Path, key: str) -> None:
    """The byte prefilter looked for the whole name, so a file that only builds it was never
    read (a review, 2026-12-05); the docs say `+` and f-string keys count."""
    src = f'import os\nimport torch\nD = "DEVICES"\nV = "VISIBLE"\nos.environ[{key}] = "1"\n'
    (tmp_path / "t.py").write_text(src)
    assert [(f.rule, f.line) for f in lint_paths([str(tmp_path)]).findings] == [("GPF001", 5)]
