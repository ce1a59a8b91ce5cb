"""Importers found from their side (project.importers_of_file): a folder without __init__.py is
a namespace package, so `from src.model import build` loads src/model.py, whose module name in
the run is `model`. Shown through GPF002, whose DataParallel is the single-process fallback
when a module that imports it offers DDP, unless the module's own `__main__` run takes it
(KKinder82/UER-py finetune/run_classifier.py, imported by run_classifier_deepspeed.py)."""

from __future__ import annotations

from pathlib import Path

from gpufix.workload.lint import lint_paths

HELPER = """\
import torch


def build(model):
    if torch.cuda.device_count() > 1:
        model = torch.nn.DataParallel(model)
    return model
{tail}"""

DDP_TRAIN = """\
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from src.model import build


def main(model, rank):
    dist.init_process_group("nccl")
    return DistributedDataParallel(build(model), device_ids=[rank])
"""


def _gpf002(tmp_path: Path, tail: str = "", importer: str = DDP_TRAIN) -> list[str]:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "model.py").write_text(HELPER.format(tail=tail))
    (tmp_path / "train.py").write_text(importer)
    found = lint_paths([str(tmp_path)]).findings
    return [f"{Path(f.path).name}:{f.line}" for f in found if f.rule == "GPF002"]


def test_a_namespace_package_importer_that_offers_ddp_is_seen(tmp_path: Path) -> None:
    assert _gpf002(tmp_path) == []


def test_without_the_ddp_importer_dataparallel_is_reported(tmp_path: Path) -> None:
    plain = "from src.model import build\n\n\ndef main(model):\n    return build(model)\n"
    assert _gpf002(tmp_path, importer=plain) == ["model.py:6"]


def test_the_modules_own_script_run_keeps_its_dataparallel(tmp_path: Path) -> None:
    tail = '\n\ndef main():\n    build(None)\n\n\nif __name__ == "__main__":\n    main()\n'
    assert _gpf002(tmp_path, tail) == ["model.py:6"]


def test_a_main_block_that_does_not_reach_it_stays_exempt(tmp_path: Path) -> None:
    tail = '\n\nif __name__ == "__main__":\n    print("helpers only")\n'
    assert _gpf002(tmp_path, tail) == []


def test_a_main_block_that_names_main_without_calling_it_reaches_it(tmp_path: Path) -> None:
    # fire.Fire(main), or a dispatch dict the block looks up (a second review's shapes)
    for tail in (
        "\n\ndef main():\n    build(None)\n\n\nif __name__ == '__main__':\n    import fire\n"
        "    fire.Fire(main)\n",
        "\n\ndef main():\n    build(None)\n\n\nENTRY = {'train': main}\n\n"
        "if __name__ == '__main__':\n    ENTRY['train']()\n",
    ):
        for p in tmp_path.iterdir():
            if p.is_file():
                p.unlink()
        if (tmp_path / "src").exists():
            for p in (tmp_path / "src").iterdir():
                p.unlink()
            (tmp_path / "src").rmdir()
        assert _gpf002(tmp_path, tail) == ["model.py:6"]
