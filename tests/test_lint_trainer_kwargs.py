"""GPF009 through a dict a Lightning Trainer gets as `**kwargs`: in the same scope of one file,
and across modules (the shape of MLI-lab/ProPicker, a precision set's look-up: `trainer_args` in
train_cfg.py, `pl.Trainer(**trainer_args)` in train.py; lint-measured.md)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from gpufix.workload.lint import lint_paths, lint_source
from gpufix.workload.lint.config import LintConfig


def _gpf009(src: str) -> list[int]:
    return [f.line for f in lint_source(textwrap.dedent(src), "train.py") if f.rule == "GPF009"]


def test_a_dict_literal_splatted_into_the_trainer() -> None:
    src = """\
        import pytorch_lightning as pl

        trainer_args = {"max_epochs": 10, "detect_anomaly": True}
        trainer = pl.Trainer(**trainer_args)
    """
    assert _gpf009(src) == [3]


def test_dict_calls_entries_and_attributes_in_one_class() -> None:
    src = """\
        import lightning as L

        def main():
            kw = dict(max_epochs=3, detect_anomaly=True)
            L.Trainer(**kw).fit(None)

        def other():
            opts = {}
            opts["detect_anomaly"] = True
            return L.Trainer(**opts)

        class Runner:
            def __init__(self):
                self.trainer_kwargs = {"detect_anomaly": True}

            def fit(self):
                return L.Trainer(**self.trainer_kwargs)
    """
    assert _gpf009(src) == [4, 9, 14]


def test_what_does_not_reach_a_trainer_or_is_not_on() -> None:
    src = """\
        import pytorch_lightning as pl

        meta = {"detect_anomaly": True, "seed": 7}  # a record, never a Trainer's
        log(meta)

        def build():
            args = {"detect_anomaly": True}
            return args

        def main(debug):
            args = {"detect_anomaly": False}
            pl.Trainer(**args)
            if debug:
                more = {"detect_anomaly": True}
                pl.Trainer(**more)
            flags = {"detect_anomaly": debug}
            pl.Trainer(**flags)
    """
    # `args` in build() is another function's local: main()'s Trainer gets its own `args`
    assert _gpf009(src) == []


def test_the_fix_turns_it_off() -> None:
    src = 'import pytorch_lightning as pl\nkw = {"detect_anomaly": True}\npl.Trainer(**kw)\n'
    [f] = [f for f in lint_source(src, "train.py") if f.rule == "GPF009"]
    assert f.fix is not None
    [edit] = f.fix.replacements
    assert edit.text == "False"


def test_across_modules(tmp_path: Path) -> None:
    (tmp_path / "train_cfg.py").write_text(
        'trainer_args = {\n    "gpus": [0],\n    "detect_anomaly": True,\n}\n'
        'unused_args = {"detect_anomaly": True}\n'
    )
    (tmp_path / "train.py").write_text(
        "import pytorch_lightning as pl\n"
        "from train_cfg import trainer_args\n\n"
        "def main():\n"
        "    pl.Trainer(**trainer_args).fit(None)\n\n"
        'if __name__ == "__main__":\n'
        "    main()\n"
    )
    found = lint_paths([str(tmp_path)], LintConfig(tmp_path)).findings
    assert [(Path(f.path).name, f.line) for f in found if f.rule == "GPF009"] == [
        ("train_cfg.py", 3)
    ]
