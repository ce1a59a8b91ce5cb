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
    assert code == 3 and len(err.strip().splitlines()) == 1  # invalid input, docs/exit-codes.md
    assert "holds no gpufix content" in err and len(err) < 400


def test_a_state_dir_that_cannot_be_made_is_one_line(
    cli: CliRun, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("GPUFIX_STATE_DIR", str(tmp_path / "file"))
    code, _, err = cli("status")
    assert code == 1 and len(err.strip().splitlines()) == 1
    assert "the state directory" in err and "is not a directory" in err


def test_reading_the_runs_creates_no_state_directory(
    cli: CliRun, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`gpufix status` and `gpufix rollback latest` only read: with no state directory yet they
    say there are no runs and leave nothing behind."""
    state = tmp_path / "state"
    monkeypatch.setenv("GPUFIX_STATE_DIR", str(state))
    code, out, _ = cli("status")
    assert code == 0 and out.startswith("no apply runs recorded yet")
    code, _, err = cli("status", "20261206T000000-abcdef")
    assert code == 3 and "no apply runs recorded yet" in err
    code, _, err = cli("rollback", "latest", "host01")
    assert code == 3 and "no apply runs recorded yet" in err
    assert not state.exists()
    state.mkdir()  # a state directory with no runs/ yet: still nothing made
    code, out, _ = cli("status")
    assert code == 0 and out.startswith("no apply runs recorded yet")
    assert list(state.iterdir()) == []


def test_an_ansible_cfg_in_the_working_directory_runs_nothing(tmp_path: Path) -> None:
    """An operator unpacks a ticket's bundle and runs gpufix there: the bundle's ansible.cfg
    named a vars plugin that Ansible loaded inside gpufix, as root, even for `plan`. gpufix
    reads its own ansible.cfg (the content root's), as its playbook runs do."""
    import os
    import subprocess
    import sys

    marker = tmp_path / "ran"
    plugins = tmp_path / "vp"
    plugins.mkdir()
    (plugins / "evil.py").write_text(
        "from ansible.plugins.vars import BaseVarsPlugin\n"
        "class VarsModule(BaseVarsPlugin):\n"
        "    REQUIRES_ENABLED = False\n"
        "    def get_vars(self, loader, path, entities, cache=True):\n"
        f"        open({str(marker)!r}, 'w').close()\n"
        "        return {}\n"
    )
    (tmp_path / "ansible.cfg").write_text(
        f"[defaults]\nvars_plugins = {plugins}\nvars_plugins_enabled = host_group_vars,evil\n"
    )
    inventory = Path(__file__).resolve().parents[2] / "inventory" / "example.yml"
    env = {k: v for k, v in os.environ.items() if k != "ANSIBLE_CONFIG"}
    r = subprocess.run(
        [sys.executable, "-m", "gpufix", "plan", "host01", "-i", str(inventory)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert r.returncode in (0, 4), r.stderr
    assert not marker.exists()


@pytest.mark.parametrize("kind", ["too-long", "under-a-file"])
def test_a_state_dir_status_cannot_read_is_one_line(
    cli: CliRun, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, kind: str
) -> None:
    """A name the kernel refuses was an internal error, and a path through a regular file
    read as "no apply runs recorded yet" (attack review, 2026-12-06)."""
    (tmp_path / "file").write_text("")
    state = "/" + "a" * 5000 if kind == "too-long" else str(tmp_path / "file" / "state")
    monkeypatch.setenv("GPUFIX_STATE_DIR", state)
    for argv in (("status",), ("rollback", "latest", "h1", "-i", "x.yml")):
        code, _, err = cli(*argv)
        assert code == 1 and err.count("\n") == 1, err
        assert "state directory" in err and len(err) < 400


def test_control_characters_in_an_error_are_shown_not_sent_to_the_terminal(
    cli: CliRun, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Errors were printed with only their whitespace squeezed: OSC 52 (clipboard), OSC 0
    (window title), C1 CSI and bidi overrides from a host's message, a journal or an
    environment value reached the operator's terminal raw (attack review, 2026-12-06)."""
    evil = "\x1b]52;c;cHduZWQ=\x07\x9b31m\u202eevil\x1b]0;PWNED\x07"
    monkeypatch.setenv("GPUFIX_HOME", str(tmp_path / evil))
    code, _, err = cli("plan", "host01")
    assert code == 3 and err.count("\n") == 1
    assert not any(c in err for c in "\x1b\x07\x9b\u202e"), repr(err)
    assert "\\x1b]52" in err and "\\u202e" in err
