"""The environment is input too: GPUFIX_HOME and GPUFIX_STATE_DIR that cannot be used are one
line and a documented exit code, never an internal error."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import CliRun


@pytest.mark.parametrize(
    "home",
    [
        "/tmp/" + "a" * 5000,  # a name the kernel refuses (ENAMETOOLONG): was an internal error
        "/nonexistent/gpufix",
        "relative/dir",
    ],
)
def test_an_unusable_gpufix_home_is_one_line(
    cli: CliRun, monkeypatch: pytest.MonkeyPatch, home: str
) -> None:
    monkeypatch.setenv("GPUFIX_HOME", home)
    code, _, err = cli("plan", "host01")
    assert code == 1 and len(err.strip().splitlines()) == 1
    assert "holds no gpufix content" in err and len(err) < 400


def test_a_state_dir_that_cannot_be_made_is_one_line(
    cli: CliRun, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("GPUFIX_STATE_DIR", str(tmp_path / "file" / "state"))
    code, _, err = cli("status")
    assert code == 1 and len(err.strip().splitlines()) == 1
