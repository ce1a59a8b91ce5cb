"""gpufix lint across functions and modules: helpers, entry points, aliases, the library table."""

from __future__ import annotations

import textwrap
from pathlib import Path

from gpufix.workload.lint import LintFinding, lint_paths, lint_source
from gpufix.workload.lint.libraries import load_table, parse_table


def _project(tmp_path: Path, files: dict[str, str]) -> list[LintFinding]:
    for name, src in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(src))
    return list(lint_paths([str(tmp_path)]).findings)


def _where(findings: list[LintFinding]) -> list[tuple[str, int, str]]:
    return sorted((Path(f.path).name, f.line, f.rule) for f in findings)


def test_helper_in_a_module_that_imported_torch(tmp_path: Path) -> None:
    found = _project(
        tmp_path,
        {
            "utils.py": """
                import os
                import torch
                def select_device(device):
                    os.environ["CUDA_VISIBLE_DEVICES"] = device
                    return torch.device("cuda")
                """,
            "train.py": """
                from utils import select_device
                select_device("1")
                """,
        },
    )
    assert _where(found) == [("utils.py", 5, "GPF001")]
    assert "set in select_device() after `import torch` (line 3)" in found[0].message


def test_helper_without_torch_called_after_the_caller_imported_it(tmp_path: Path) -> None:
    found = _project(
        tmp_path,
        {
            "envutil.py": """
                import os
                def pin(gpus):
                    os.environ["CUDA_VISIBLE_DEVICES"] = gpus
                """,
            "train.py": """
                import torch
                import envutil
                envutil.pin("0")
                """,
        },
    )
    assert _where(found) == [("envutil.py", 4, "GPF001")]
    [f] = found
    assert "`import torch` (train.py:2)" in f.message
    assert f.related[0].path.endswith("train.py") and f.related[0].line == 2


def test_set_up_function_called_before_the_import_is_clean(tmp_path: Path) -> None:
    assert not _project(
        tmp_path,
        {
            "train.py": """
                import os
                def set_gpus():
                    os.environ["CUDA_VISIBLE_DEVICES"] = "0,1"
                set_gpus()
                import torch
                """,
        },
    )


def test_torch_loaded_through_the_projects_own_package(tmp_path: Path) -> None:
    found = _project(
        tmp_path,
        {
            "proj/__init__.py": "",
            "proj/models.py": "import torch.nn as nn\nclass Net(nn.Module): pass\n",
            "run.py": """
                import os
                from proj.models import Net
                os.environ["CUDA_VISIBLE_DEVICES"] = "0"
                """,
        },
    )
    assert _where(found) == [("run.py", 4, "GPF001")]
    assert "proj/models.py runs `import torch.nn`" in found[0].message


def test_click_group_then_command(tmp_path: Path) -> None:
    found = _project(
        tmp_path,
        {
            "cli.py": """
                import os
                import click
                @click.group()
                def cli():
                    import torch
                @cli.command()
                def train():
                    os.environ["CUDA_VISIBLE_DEVICES"] = "0"
                if __name__ == "__main__":
                    cli()
                """,
        },
    )
    assert _where(found) == [("cli.py", 9, "GPF001")]


def test_fire_and_typer_entry_points(tmp_path: Path) -> None:
    found = _project(
        tmp_path,
        {
            "a.py": """
                import os, fire
                def setup():
                    import torch
                def main(gpus="0"):
                    setup()
                    os.environ["CUDA_VISIBLE_DEVICES"] = gpus
                fire.Fire(main)
                """,
            "b.py": """
                import os, typer
                app = typer.Typer()
                def load():
                    import transformers
                @app.command()
                def train():
                    load()
                    os.environ["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
                app()
                """,
        },
    )
    assert _where(found) == [("a.py", 7, "GPF001"), ("b.py", 9, "GPF001")]


def test_runner_method_chain_and_instances() -> None:
    src = """
        import os
        class Runner:
            def __init__(self):
                import torch
            def setup(self):
                os.environ["CUDA_VISIBLE_DEVICES"] = "0"
        def go():
            r = Runner()
            r.setup()
        Runner().setup()
        """
    found = lint_source(textwrap.dedent(src), "t.py")
    assert [(f.line, f.rule) for f in found] == [(7, "GPF001")]
    assert "in Runner() called at line" in found[0].message


def test_libraries_from_the_table_and_cuda_runtimes() -> None:
    for imp in ("import mmcv", "from numba import cuda", "import cupy as cp", "import jax"):
        src = f'import os\n{imp}\nos.environ["CUDA_VISIBLE_DEVICES"] = "0"\n'
        assert [f.line for f in lint_source(src, "t.py")] == [3], imp
    for imp in ("import numba", "import numpy", "import jaxtyping"):
        src = f'import os\n{imp}\nos.environ["CUDA_VISIBLE_DEVICES"] = "0"\n'
        assert not lint_source(src, "t.py"), imp


def test_importlib_aliases_and_computed_keys() -> None:
    src = """
        import os, importlib
        tm = importlib.import_module("torch")
        env = os.environ
        env["CUDA_VISIBLE_DEVICES"] = "0"
        PREFIX = "CUDA"
        os.environ[f"{PREFIX}_VISIBLE_DEVICES"] = "1"
        os.environ["CUDA_" + "DEVICE_ORDER"] = "PCI_BUS_ID"
        child = os.environ.copy()
        child["CUDA_VISIBLE_DEVICES"] = "2"
        """
    assert [f.line for f in lint_source(textwrap.dedent(src), "t.py")] == [5, 7, 8]
    dunder = 'import os\n__import__("torch")\nos.environ["CUDA_VISIBLE_DEVICES"] = "0"\n'
    assert [f.line for f in lint_source(dunder, "t.py")] == [3]


def test_module_alias_of_torch_nn() -> None:
    src = "import torch\nnn = torch.nn\nm = nn.DataParallel(object())\n"
    assert [(f.line, f.rule) for f in lint_source(src, "t.py")] == [(3, "GPF002")]


def test_library_table_rows_have_sources_and_bad_rows_are_refused() -> None:
    table = load_table()
    assert table.match("numba.cuda.random").module == "numba.cuda"  # type: ignore[union-attr]
    assert table.match("numba") is None
    assert all(row.source.startswith("https://") for row in table.by_module.values())
    for bad in (
        "libraries: []",
        "libraries: [{module: torch, kind: imports-torch}]",
        "libraries: [{module: 'a b', kind: imports-torch, source: 'https://x'}]",
        "libraries: [{module: t, kind: maybe, source: 'https://x'}]",
    ):
        try:
            parse_table(bad)
        except ValueError:
            continue
        raise AssertionError(bad)


def test_a_projects_own_data_parallel_subclass_is_data_parallel(tmp_path: Path) -> None:
    """aw_nas#17: the trainer used the project's `class DataParallel(torch.nn.DataParallel)`;
    DDP was the fix. A class of that name not derived from torch's is not reported."""
    found = _project(
        tmp_path,
        {
            "proj/__init__.py": "",
            "proj/utils.py": """
                import torch
                class DataParallel(torch.nn.DataParallel):
                    pass
                class Wrapped(DataParallel):
                    pass
                """,
            "proj/other.py": "class DataParallel:\n    pass\n",
            "train.py": """
                import torch
                from proj.utils import DataParallel, Wrapped
                from proj import other
                def fit(model):
                    a = DataParallel(model)
                    b = Wrapped(model)
                    c = other.DataParallel()
                    a(torch.zeros(1)).sum().backward()
                fit(None)
                """,
        },
    )
    assert _where(found) == [("train.py", 6, "GPF002"), ("train.py", 7, "GPF002")]
