"""GPF008 several calls below the function that starts the process group (deepreach.py).

Reduced from NCAR/miles-credit: `predict()` in a script calls `setup()` (init_process_group,
another module), then `load_model(conf, load_weights=True)`, a re-export of the package
`credit.models`, whose `torch.load` of the checkpoint goes to `model.load_state_dict`."""

from __future__ import annotations

from pathlib import Path

from gpufix.workload.lint import lint_paths
from gpufix.workload.lint.deepreach import _imports_one_of

DIST = """\
import torch.distributed as dist


def setup(rank, world_size):
    dist.init_process_group("nccl", rank=rank, world_size=world_size)
"""
INIT = """\
from .models import load_model
"""
MODELS = """\
import torch
from .ckpt import restore


def load_model(conf, load_weights=False):
    model = torch.nn.Linear(2, 2)
    if load_weights:
        restore(model, conf["path"])
    return model
"""
CKPT = """\
import os
import torch


def restore(model, path):
    apply_weights(model, path)


def apply_weights(model, path):
    {load}


class Restorer:
    def __init__(self, model):
        self.model = model

    def load(self, path):
        self.model.load_state_dict(torch.load(path))

    def init_weights(self, pretrained=""):
        if os.path.isfile(pretrained):
            self.model.load_state_dict(torch.load(pretrained))
"""
PREDICT = """\
import torch
from dist_utils import setup
from pkg import load_model
from pkg.ckpt import Restorer


def predict(rank, world_size, conf):
    setup(rank, world_size)
    torch.cuda.set_device(rank)
    {call}


if __name__ == "__main__":
    predict(0, 2, {{"path": "checkpoint.pt"}})
"""
LOAD = "model.load_state_dict(torch.load(path))"


def _gpf008(
    tmp_path: Path, call: str, load: str = LOAD, predict: str = PREDICT
) -> list[tuple[str, int, str]]:
    (tmp_path / "pkg").mkdir(parents=True)
    (tmp_path / "pkg" / "__init__.py").write_text(INIT)
    (tmp_path / "pkg" / "models.py").write_text(MODELS)
    (tmp_path / "pkg" / "ckpt.py").write_text(CKPT.format(load=load))
    (tmp_path / "dist_utils.py").write_text(DIST)
    (tmp_path / "predict.py").write_text(predict.format(call=call))
    res = lint_paths([str(tmp_path)])
    return [(Path(f.path).name, f.line, f.message) for f in res.findings if f.rule == "GPF008"]


def test_a_load_three_calls_deep_through_a_re_export_is_found(tmp_path: Path) -> None:
    # predict() -> load_model() (pkg/__init__.py re-exports it) -> restore() -> apply_weights()
    ((name, line, _),) = _gpf008(tmp_path, "load_model(conf, load_weights=True)")
    assert (name, line) == ("ckpt.py", 10)


def test_the_message_names_the_function_that_starts_the_group_and_the_path(
    tmp_path: Path,
) -> None:
    ((_, _, msg),) = _gpf008(tmp_path, "load_model(conf, True)")
    assert (
        "in code every rank runs: predict.py predict() starts the process group (through "
        "setup()) and calls load_model() → restore() → apply_weights()"
    ) in msg


def test_found_without_the_re_export_too(tmp_path: Path) -> None:
    predict = PREDICT.replace("from pkg import load_model", "from pkg.models import load_model")
    found = _gpf008(tmp_path, "load_model(conf, load_weights=True)", predict=predict)
    assert [(n, line) for n, line, _ in found] == [("ckpt.py", 10)]


def test_not_found_under_a_rank_zero_branch(tmp_path: Path) -> None:
    assert _gpf008(tmp_path, "if rank == 0:\n        load_model(conf, load_weights=True)") == []


def test_not_found_when_the_path_leaves_load_weights_false(tmp_path: Path) -> None:
    assert _gpf008(tmp_path, "load_model(conf)") == []  # the default, False
    assert _gpf008(tmp_path / "b", "load_model(conf, load_weights=False)") == []
    assert _gpf008(tmp_path / "c", "load_model(conf, None)") == []


def test_a_flag_handed_on_false_is_still_false(tmp_path: Path) -> None:
    predict = PREDICT.replace(
        "def predict(",
        "def build(conf, weights=False):\n    return load_model(conf, weights)\n\n\ndef predict(",
    )
    assert _gpf008(tmp_path, "build(conf)", predict=predict) == []
    found = _gpf008(tmp_path / "b", "build(conf, weights=True)", predict=predict)
    assert [(n, line) for n, line, _ in found] == [("ckpt.py", 10)]


def test_a_method_nobody_calls_is_not_read(tmp_path: Path) -> None:
    # Restorer(...) runs __init__ only; its load() never runs.
    assert _gpf008(tmp_path, "Restorer(None)") == []
    found = _gpf008(tmp_path / "b", "Restorer(None).load('x.pt')")
    assert [(n, line) for n, line, _ in found] == [("ckpt.py", 18)]


def test_an_empty_default_path_does_not_load(tmp_path: Path) -> None:
    # PoseEstimationPlatform: init_weights() with pretrained="" never passes os.path.isfile.
    assert _gpf008(tmp_path, "Restorer(None).init_weights()") == []
    found = _gpf008(tmp_path / "b", "Restorer(None).init_weights('w.pt')")
    assert [(n, line) for n, line, _ in found] == [("ckpt.py", 22)]


def test_a_load_with_map_location_is_not_reported(tmp_path: Path) -> None:
    load = 'model.load_state_dict(torch.load(path, map_location="cpu"))'
    assert _gpf008(tmp_path, "load_model(conf, load_weights=True)", load) == []


def test_a_load_of_data_is_not_reported(tmp_path: Path) -> None:
    assert (
        _gpf008(tmp_path, "load_model(conf, load_weights=True)", "stats = torch.load(path)") == []
    )


def test_a_caller_that_starts_no_group_is_not_rank_code(tmp_path: Path) -> None:
    predict = PREDICT.replace("    setup(rank, world_size)\n", "")
    assert _gpf008(tmp_path, "load_model(conf, load_weights=True)", predict=predict) == []


def test_a_starter_imported_on_a_continued_line_is_a_seed(tmp_path: Path) -> None:
    """The prefilter reads the whole import statement: the module that starts the group is
    named only on a backslash-continued line."""
    predict = PREDICT.replace("from dist_utils import setup", "import os, \\\n    dist_utils")
    predict = predict.replace(
        "    setup(rank, world_size)", "    dist_utils.setup(rank, world_size)"
    )
    found = _gpf008(tmp_path, "load_model(conf, load_weights=True)", predict=predict)
    assert [(n, line) for n, line, _ in found] == [("ckpt.py", 10)]


def test_the_import_prefilter_reads_whole_statements_and_non_ascii_names() -> None:
    words = frozenset({b"setup_ddp", "módulo".encode()})
    found = [
        b"from pkg.mod import (\n    a,\n    setup_ddp,\n)\n",
        b"from pkg.mod \\\n    import setup_ddp\n",
        b"import os, \\\n  setup_ddp\n",
        "from módulo import x\n".encode(),
    ]
    not_found = [b"from pkg import a\nsetup_ddp()\n", b"x = (\nimport_thing)\n", b"import"]
    assert all(_imports_one_of(d, words) for d in found)
    assert not any(_imports_one_of(d, words) for d in not_found)
