"""transformers / accelerate beside a torch move: never backwards or across a major version
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
