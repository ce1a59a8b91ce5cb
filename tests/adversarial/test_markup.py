"""Text from hosts, snapshots and plan files is printed, never interpreted: no Rich markup, no
emoji codes, no terminal escapes reach the terminal (issue 10, "Robust input")."""

from __future__ import annotations

import copy
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from gpufix.cli import render
from rich.table import Table

ROOT = Path(__file__).resolve().parents[2]
BASE = ROOT / "tests" / "fixtures" / "hosts" / "bionic-ga-2x3090.json"

MARKUP = "[black on black]hidden[/]"
CLOSING = "[/usr/local/cuda-11.8]"
EMOJI = ":thumbs_up:"
TITLE = "\x1b]0;pwned\x07"  # OSC: sets the terminal title
CLEAR = "\x1b[2J\x1b[H"  # clears the screen
BIDI = "evil\u202egnp.exe"  # right-to-left override
FORGED = "x\nChosen strategy: none"  # a value that forges a line of output


def gpufix(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpufix", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200", "FORCE_COLOR": "1", "TERM": "xterm"},
    )


def snapshot(tmp_path: Path, name: str, host: str, **facts: Any) -> Path:
    doc = json.loads(BASE.read_text())
    doc = copy.deepcopy(doc)
    doc["host"] = host
    for path, value in facts.items():
        node = doc["facts"]
        *parents, last = path.split("__")
        for p in parents:
            node = node[p]
        node[last] = value
    out = tmp_path / name
    out.write_text(json.dumps(doc))
    return out


def no_escape_reaches_the_terminal(text: str) -> None:
    """Only SGR colour sequences of ours may appear: no OSC, no cursor or erase sequences."""
    assert "\x07" not in text and "\x1b]" not in text
    assert "\x1b[2J" not in text and "\x1b[H" not in text
    assert "\u202e" not in text


@pytest.fixture
def hostile(tmp_path: Path) -> tuple[Path, Path]:
    a = snapshot(
        tmp_path,
        "a.json",
        f"host{TITLE}{CLEAR}",
        kernel__running="4.15.0-213-generic" + MARKUP,
        cuda_default={"path": CLOSING, "version": CLOSING},
        os__pretty_name=EMOJI,
    )
    b = snapshot(tmp_path, "b.json", BIDI, kernel__running=FORGED)
    return a, b


def test_diff_prints_markup_and_escapes_literally(hostile: tuple[Path, Path]) -> None:
    a, b = hostile
    r = gpufix("diff", str(a), str(b))
    assert r.returncode == 0, r.stderr
    assert "internal error" not in r.stderr
    assert "4.15.0-213-generic[black on" in r.stdout  # shown (shortened), not applied
    assert CLOSING in r.stdout
    assert EMOJI in r.stdout and "👍" not in r.stdout
    assert "x\\nChosen strategy: none" in r.stdout  # the newline is shown, not obeyed
    no_escape_reaches_the_terminal(r.stdout)


def test_diff_all_and_json_survive_the_same_input(hostile: tuple[Path, Path]) -> None:
    a, b = hostile
    r = gpufix("diff", str(a), str(b), "--all")
    assert r.returncode == 0 and CLOSING in r.stdout and MARKUP in r.stdout
    no_escape_reaches_the_terminal(r.stdout)
    doc = json.loads(gpufix("diff", str(a), str(b), "--json").stdout)
    kernel = next(d for d in doc["differences"] if d["key"] == "kernel")
    assert kernel["values"][str(a)] == "4.15.0-213-generic" + MARKUP  # JSON: the exact value


def test_plan_shows_a_hostile_host_name_and_kernel_as_text(hostile: tuple[Path, Path]) -> None:
    a, b = hostile
    r = gpufix("plan", "x", "--facts", str(a))
    assert r.returncode == 0, r.stderr
    assert "gpufix plan for x" in r.stdout  # planned for TARGET; the snapshot's name in a risk
    assert "recorded on 'host\\x1b]0;pwned\\x07\\x1b[2J\\x1b[H'" in r.stdout
    r = gpufix("plan", "all:!x", "--facts", str(a))  # no host name: the snapshot's is the plan's
    assert "gpufix plan for host\\x1b]0;pwned\\x07\\x1b[2J\\x1b[H" in r.stdout
    assert MARKUP in r.stdout
    no_escape_reaches_the_terminal(r.stdout)
    r = gpufix("plan", "x", "--facts", str(b))
    assert "evil\\u202egnp.exe" in r.stdout
    assert "\nChosen strategy: none" not in r.stdout.split("Chosen strategy:")[0] + "\n"
    no_escape_reaches_the_terminal(r.stdout)


def test_tables_of_plain_strings_are_not_interpreted() -> None:
    """apply's and status's tables pass host names and notes as plain strings."""
    out = io.StringIO()
    c = render.SafeConsole(file=out, width=200, color_system=None)
    t = Table(title=f"run {MARKUP}")
    t.add_column("host")
    t.add_column("note")
    t.add_row(CLOSING, f"{TITLE}{EMOJI}")
    c.print(t)
    c.print(f"{MARKUP} {CLEAR}", markup=True)  # even when a caller asks for markup
    text = out.getvalue()
    assert MARKUP in text and CLOSING in text and EMOJI in text
    assert "\\x1b]0;pwned\\x07" in text and "\\x1b[2J" in text
    no_escape_reaches_the_terminal(text)


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("plain", "plain"),
        ("tab\there", "tab\there"),
        ("\x00\x08\x7f\x9b", "\\x00\\x08\\x7f\\x9b"),
        ("a\u2066b\u2069", "a\\u2066b\\u2069"),
    ],
)
def test_clean_shows_control_characters_as_escapes(raw: str, shown: str) -> None:
    assert render.clean(raw) == shown
    assert "\n" not in render.one_line("a\nb") and "\t" not in render.one_line("a\tb")


def test_labelled_lines_keep_brackets_and_escape_controls() -> None:
    """The probe's per-host line: `host: summary`, both data."""
    out = io.StringIO()
    render.labelled(render.SafeConsole(file=out, width=200), CLOSING + TITLE, "ranks [1]\nx")
    assert out.getvalue() == f"{CLOSING}\\x1b]0;pwned\\x07: ranks [1]\\nx\n"


def test_preflight_text_shows_a_hostile_kernel_escaped(tmp_path: Path) -> None:
    snap = snapshot(tmp_path, "k.json", f"h{TITLE}", kernel__running=f"4.15.0{CLEAR}")
    r = gpufix("preflight", "--facts", str(snap))
    assert "4.15.0\\x1b[2J\\x1b[H" in r.stdout and "h\\x1b]0;pwned\\x07: " in r.stdout
    no_escape_reaches_the_terminal(r.stdout)


def test_hostile_os_release_words_in_the_other_os_risk_are_text(tmp_path: Path) -> None:
    """os.id_like (facts module 1.4.0) reaches the plan's risk line for another OS: shown as
    text, never as markup, escapes or a forged line."""
    words = [MARKUP, TITLE + CLEAR, FORGED]
    os_release = {"id": "rhel", "id_like": words, "version_id": "8.8", "codename": "ootpa"}
    snap = snapshot(tmp_path, "rhel.json", "h", os={**os_release, "pretty_name": None})
    r = gpufix("plan", "h", "--facts", str(snap), "--strategy", "pcie-acs")
    assert r.returncode == 0, r.stderr
    risk = next(ln for ln in r.stdout.splitlines() if "is not Debian-family" in ln)
    assert MARKUP in risk and "\\x1b]0;pwned" in risk  # shown, not applied
    assert not any(ln.startswith("Chosen strategy: none") for ln in r.stdout.splitlines())
    no_escape_reaches_the_terminal(r.stdout)
