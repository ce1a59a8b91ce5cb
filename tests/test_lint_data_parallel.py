"""GPF002: DataParallel for inference (evaluation and benchmark scripts) is left alone; wherever
the module, or one it imports, trains, DataParallel is still reported."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from gpufix.workload.lint import lint_paths, lint_source


def _dp_lines(src: str) -> list[int]:
    found = lint_source(textwrap.dedent(src), "t.py")
    return [f.line for f in found if f.rule == "GPF002"]


def _dp_files(tmp_path: Path, files: dict[str, str]) -> set[tuple[str, int]]:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    found = lint_paths([str(tmp_path)]).findings
    return {(Path(f.path).name, f.line) for f in found if f.rule == "GPF002"}


# A module-level evaluation script (the shape of biobricks-ai/toxtransformer's
# code/14_property_benchmarks.py, rebuilt): load a trained model, wrap it, predict under no_grad.
EVAL_SCRIPT = """
    import torch
    import proj.models as pm
    model = pm.Net.load("brick/net").to("cuda:0")
    model = torch.nn.DataParallel(model)

    def predict(batch):
        with torch.no_grad():
            return torch.softmax(model(batch), dim=1)

    scores = [predict(b) for b in torch.load("batches.pt")]
    """


def test_eval_script_under_no_grad_is_left_alone() -> None:
    assert _dp_lines(EVAL_SCRIPT) == []


def test_module_level_training_is_reported() -> None:
    src = (
        EVAL_SCRIPT
        + """
    opt = torch.optim.AdamW(model.parameters())
    for b in torch.load("batches.pt"):
        model(b).sum().backward()
        opt.step()
    """
    )
    assert _dp_lines(src) == [5]


def test_training_in_a_function_the_script_calls_is_reported() -> None:
    src = """
        import torch
        import proj.models as pm
        def fit(model, batches):
            for b in batches:
                model(b).sum().backward()
        model = torch.nn.DataParallel(pm.Net.load("brick/net"))
        fit(model, torch.load("batches.pt"))
        """
    assert _dp_lines(src) == [7]


def test_fastai_fit_and_model_train_count_as_training() -> None:
    fastai = """
        import torch
        from fastai.vision.all import Learner
        model = torch.nn.DataParallel(torch.load("net.pt"))
        Learner(dls, model).fit_one_cycle(10)
        """
    train_mode = """
        import torch
        model = torch.nn.DataParallel(torch.load("net.pt"))
        model.train()
        """
    assert _dp_lines(fastai) == [4] and _dp_lines(train_mode) == [3]


def test_predictions_without_no_grad_after_loading_weights_are_left_alone() -> None:
    # toxtransformer's 12_eval_multi_properties.py and 03_finetune_evaluate.py: no no_grad, the
    # outputs are detached; 01_finetune_data.py wraps the loaded model and never calls it.
    predict = """
        import torch
        import proj.models as pm
        model = torch.nn.DataParallel(pm.Net.load("brick/net").to("cuda:0"))
        probs = torch.softmax(model(torch.load("x.pt")), dim=1).detach().cpu()
        """
    unused = """
        import torch
        import proj.models as pm
        model = pm.Net.load("brick/net").to("cuda:0")
        model = torch.nn.DataParallel(model)
        tokenizer = model.module.tokenizer
        """
    assert _dp_lines(predict) == [] and _dp_lines(unused) == []


def test_a_fresh_model_with_no_sign_of_inference_is_still_reported() -> None:
    src = """
        import torch
        from torch import nn
        model = nn.DataParallel(nn.Linear(8, 8).cuda())
        """
    assert _dp_lines(src) == [4]


def test_a_function_that_evaluates_through_a_helper_is_left_alone() -> None:
    src = """
        import torch
        def score(model, batches):
            with torch.inference_mode():
                return [model(b) for b in batches]
        @torch.no_grad
        def embed(model, batches):
            return [model(b) for b in batches]
        def main(model, batches):
            model = torch.nn.DataParallel(model)
            return score(model, batches)
        def other(model, batches):
            return embed(torch.nn.DataParallel(model), batches)
        """
    assert _dp_lines(src) == []
    # An optimizer anywhere in the module: the function may be training's evaluation step.
    assert _dp_lines(src + "opt = torch.optim.SGD(params, lr=0.1)\n") == [10, 13]


def test_a_factory_whose_importer_trains_is_reported(tmp_path: Path) -> None:
    models = """
        import torch
        def get_model(path):
            return torch.nn.DataParallel(torch.load(path))
        """
    train = """
        from proj.models import get_model
        model = get_model("net.pt")
        model(1).backward()
        """
    files = {"proj/__init__.py": "", "proj/models.py": models, "train.py": train}
    assert _dp_files(tmp_path, files) == {("models.py", 4)}


def test_training_in_an_imported_project_module_is_reported(tmp_path: Path) -> None:
    script = """
        import torch
        from proj.engine import run
        model = torch.nn.DataParallel(torch.load("net.pt"))
        with torch.no_grad():
            run(model)
        """
    engine = """
        def run(model):
            model(1).backward()
        """
    files = {"proj/__init__.py": "", "proj/engine.py": engine, "evaluate.py": script}
    found = _dp_files(tmp_path, files)
    assert found == {("evaluate.py", 4)}
    (tmp_path / "proj" / "engine.py").write_text("def run(model):\n    return model(1)\n")
    assert _dp_files(tmp_path, {}) == set()


def test_a_data_file_loaded_is_no_sign_of_inference(tmp_path: Path) -> None:
    # json/pickle/numpy loads read data, not trained weights: a fresh model is still reported.
    (tmp_path / "run.py").write_text(
        "import json\n\nimport torch\n\ncfg = json.load(open('cfg.json'))\n"
        "model = torch.nn.DataParallel(torch.nn.Linear(4, 4).cuda())\n"
        "print(model(torch.zeros(8, 4).cuda()))\n"
    )
    assert [f.rule for f in lint_paths([str(tmp_path)]).findings] == ["GPF002"]


def test_a_training_function_outside_the_run_is_training(tmp_path: Path) -> None:
    # DETR's layout: the loop is in engine.py, which a one-file run does not read.
    (tmp_path / "train.py").write_text(
        "import torch\nfrom torch import nn\nfrom engine import train_one_epoch\n\n\n"
        "def main(model, args):\n"
        "    model.load_state_dict(torch.load(args.resume, map_location='cpu'))\n"
        "    model = nn.DataParallel(model).cuda()\n"
        "    train_one_epoch(model)\n\n\n"
        'if __name__ == "__main__":\n'
        "    main(None, None)\n"
    )
    assert [f.rule for f in lint_paths([str(tmp_path)]).findings] == ["GPF002"]


@pytest.mark.parametrize(
    ("setup", "reported"),
    [
        ("gpus = [0]", False),
        ("gpus = [0]\n    gpus += [1, 2]", True),
        ("gpus = [0]\n    gpus.append(1)", True),
        ("gpus = [0, 1]", True),
        ("gpus = [*ids]", True),
    ],
    ids=["one", "grows", "appends", "two", "starred"],
)
def test_data_parallel_over_one_gpu_is_no_multi_gpu_path(setup: str, reported: bool) -> None:
    src = (
        "import torch\nfrom torch import nn\n\n\ndef main(model, opt, ids):\n"
        f"    {setup}\n    model = nn.DataParallel(model, device_ids=gpus)\n"
        "    model(torch.zeros(1)).sum().backward()\n    opt.step()\n"
    )
    assert [f.rule for f in lint_source(src, "t.py")] == (["GPF002"] if reported else [])


def test_device_ids_given_by_a_caller_are_not_known_to_be_one(tmp_path: Path) -> None:
    src = (
        "import torch\nfrom torch import nn\n\n\ndef wrap(model, device_ids):\n"
        "    return nn.DataParallel(model, device_ids=device_ids)\n\n\n"
        "def other():\n    device_ids = [0]\n    return device_ids\n"
    )
    assert [f.rule for f in lint_source(src, "t.py")] == ["GPF002"]
