"""How far a stack moves: transformers / accelerate never backwards or across a major version
without saying so (an expert review, 2026-12-03: a P100 host on transformers 5.20 was moved to
4.57.1, the newest row the table had, with no word of it)."""

from __future__ import annotations

import pytest
from gpufix.engine.kb import LibRelease
from gpufix.engine.stack_choice import lib_choice


def _row(version: str, torch_min: str | None, python_min: str = "3.9") -> LibRelease:
    return LibRelease(version, python_min, None, torch_min, "https://pypi.org/ (test row)")


ROWS = (_row("4.46.3", None, "3.8"), _row("4.50.3", "2.0"), _row("4.57.1", "2.2"))


@pytest.mark.parametrize(
    ("installed", "torch", "want", "said"),
    [
        (None, "2.5.1", "4.57.1", None),  # nothing installed: the newest that fits
        ("4.40.0", "2.5.1", "4.57.1", None),  # forward within the major line: fine
        ("4.57.1", "2.5.1", "4.57.1", None),
        ("5.20.0", "2.5.1", "5.20.0", "newer than gpufix's release table knows: kept"),
        ("4.58.0", "2.5.1", "4.58.0", "newer than gpufix's release table knows: kept"),
        ("4.57.1", "2.1.2", "4.50.3", "moves down from 4.57.1 to 4.50.3"),
        ("3.5.0", "2.5.1", "4.57.1", "no transformers 3.x release supports torch 2.5.1"),
    ],
)
def test_the_library_moves_only_forward_within_its_major_line_unless_said(
    installed: str | None, torch: str, want: str, said: str | None
) -> None:
    got, note = lib_choice("transformers", ROWS, "3.10", torch, installed)
    assert got == want
    assert (note is None) if said is None else (note is not None and said in note)


def test_a_build_that_dropped_the_gpus_moves_to_the_same_release_in_another_build() -> None:
    """An expert review (2026-12-03): torch 2.8.0+cu128 on P100s (cu128 dropped Pascal: the
    2.8.0 release notes) was moved to 2.14.1+cu126, six releases on; 2.8.0+cu126 is the smallest
    move, and no code changes with it."""
    import json
    from pathlib import Path

    from gpufix.engine import decide as engine
    from gpufix.engine.kb import load
    from gpufix.engine.rules import load as load_rules

    hosts = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"
    facts = json.loads((hosts / "jammy-4xp100-torch28.json").read_text())["facts"]
    plan = engine.decide(facts, kb=load(), rules=load_rules())
    assert plan.strategy == "cuda-downgrade"
    (step,) = plan.steps
    assert step.vars["gpufix_ml_stack_torch_version"] == "2.8.0"
    assert step.vars["gpufix_ml_stack_torch_variant"] == "cu126"
    assert not any("may need changes" in r for r in plan.risks)


def test_the_stack_already_installed_is_no_move() -> None:
    """A mutation review (2026-12-05) found this guard could never hold: it compared the
    installed torch with its local tag ("2.14.1+cu126") against the bare release, so a host on
    the newest stack that fits was offered a "move" to the same wheels."""
    import copy
    import json
    from pathlib import Path

    from gpufix.engine import decide as engine
    from gpufix.engine.kb import load
    from gpufix.engine.rules import load as load_rules

    hosts = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"
    facts = json.loads((hosts / "jammy-4xp100-torch28.json").read_text())["facts"]
    newest = copy.deepcopy(facts)
    newest["python_envs"][0]["packages"]["torch"] = "2.14.1+cu126"  # the newest fit for P100
    plan = engine.decide(newest, kb=load(), rules=load_rules())
    option = next(o for o in plan.options if o.strategy == "cuda-downgrade")
    assert not option.feasible
    assert option.reason == "the installed torch 2.14.1+cu126 is already the newest stack that fits"
    older = copy.deepcopy(facts)
    older["python_envs"][0]["packages"]["torch"] = "2.7.1+cu126"
    moved = engine.decide(older, kb=load(), rules=load_rules())
    assert next(o for o in moved.options if o.strategy == "cuda-downgrade").feasible


def test_a_stack_move_names_its_code_and_kernel_risks() -> None:
    """bionic's torch 1.12.1 on kernel 4.15, moved by name: code written for the old torch, and
    accelerate's kernel warning that the move does not touch, are both risks of the plan."""
    import json
    from pathlib import Path

    from gpufix.engine import decide as engine
    from gpufix.engine.context import Constraints
    from gpufix.engine.kb import load
    from gpufix.engine.rules import load as load_rules

    hosts = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"
    facts = json.loads((hosts / "bionic-ga-2x3090.json").read_text())["facts"]
    plan = engine.decide(
        facts, constraints=Constraints(strategy="cuda-downgrade"), kb=load(), rules=load_rules()
    )
    assert plan.strategy == "cuda-downgrade"
    assert any(
        r.startswith("code written for torch 1.12.1+cu113 may need changes") for r in plan.risks
    )
    assert "accelerate will still print the kernel warning; it is a risk factor only" in plan.risks
