"""Docs that run: every `$ ` line in README.md and docs/*.md runs here, as a user types it.

Conventions (for anyone writing docs):
- Lines in fenced blocks that start with `$ ` are commands; the lines after one, up to the next
  `$ `, are its transcript. Commands run with `bash -c`, in order, from the root of a fresh copy
  of the clone per document (so a file one line writes is there for the next), with the
  installed `.venv/bin` on PATH (as README's set-up says), a private HOME and GPUFIX_STATE_DIR.
- A command must exit 0, unless its comment ends with `(exit N)`, or the transcript shows the
  code (`$ echo $?` on the next line, or `; echo $?` on the same line, then the number).
  "Traceback" or "internal error" on stderr always fails.
- An HTML comment on the line before a block says where it runs:
  `<!-- docs-test: lab -->` against the container lab (scripts/lab.sh; built once for all lab
  blocks, in document order; `scripts/lab.sh up` runs once and `down` at the very end),
  `<!-- docs-test: gpu -->` needs an NVIDIA GPU host, `<!-- docs-test: fleet -->` needs your own
  SSH hosts. gpu and fleet lines do not run here; test_lines_that_need_a_gpu_or_a_fleet lists
  them in its skip reason, so they are never dropped silently.
A failure names the document, the line, the command, the exit code against what the doc says,
and the end of stderr.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import containers
import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARKER = re.compile(r"^<!--\s*docs-test:\s*(\w+)\s*-->$")
MODES = ("plain", "lab", "gpu", "fleet")
EXIT_COMMENT = re.compile(r"#.*\(exit (\d+)\)\s*$")
ECHO_STATUS = "echo $?"
LAB_LIFECYCLE = re.compile(r"scripts/lab\.sh\s+(up|down)\b")


@dataclass
class Command:
    doc: str
    line: int
    text: str  # as written, without "$ " (and without a trailing "; echo $?")
    mode: str
    expect: int = 0
    transcript: list[str] = field(default_factory=list)

    def where(self) -> str:
        return f"{self.doc}:{self.line}: `{self.text}`"


def _expected(cmd: Command) -> None:
    m = EXIT_COMMENT.search(cmd.text)
    if m:
        cmd.expect = int(m.group(1))


def parse(text: str, doc: str) -> list[Command]:
    """The commands of one Markdown document, with their mode, expected exit code, transcript."""
    out: list[Command] = []
    mode, fence, previous = "plain", "", ""
    current: Command | None = None
    for n, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if not fence and stripped.startswith(("```", "~~~")):
            fence, current = stripped[:3], None
            marker = MARKER.match(previous)
            mode = marker.group(1) if marker else "plain"
            if mode not in MODES:
                raise ValueError(f"{doc}:{n - 1}: unknown docs-test mode {mode!r}")
            continue
        if fence and stripped.startswith(fence):
            fence, current = "", None
            continue
        if stripped:
            previous = stripped
        if not fence:
            continue
        if not stripped.startswith("$ "):
            if current is not None:
                current.transcript.append(raw)
            continue
        command = stripped[2:].strip()
        if command == ECHO_STATUS and current is not None:
            current.transcript.append("$ echo $?")  # the next line holds the code
            continue
        current = Command(doc, n, command, mode)
        if command.endswith("; " + ECHO_STATUS):
            current.text = command[: -len("; " + ECHO_STATUS)].rstrip()
            current.transcript.append("$ echo $?")
        _expected(current)
        out.append(current)
    for cmd in out:
        _status_from_transcript(cmd)
    return out


def _status_from_transcript(cmd: Command) -> None:
    """`$ echo $?` then a number, or `cmd; echo $?` ending in a number: that is the code."""
    if "$ echo $?" not in cmd.transcript:
        return
    after = cmd.transcript[cmd.transcript.index("$ echo $?") + 1 :]
    lines = [t.strip() for t in (after or cmd.transcript) if t.strip()]
    if lines and lines[-1].isdigit():
        cmd.expect = int(lines[-1])


def commands(mode: str | None = None) -> list[Command]:
    out = []
    for path in DOCS:
        out += parse(path.read_text(), str(path.relative_to(ROOT)))
    return [c for c in out if mode is None or c.mode == mode]


def workdir(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A fresh copy of the clone (the files git tracks or would track) with this checkout's
    installed `.venv` linked in: README's commands run from a clone after scripts/install.sh."""
    work = tmp_path / "clone"
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for rel in filter(None, listed.split("\0")):
        src, dst = ROOT / rel, work / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():  # relative links (inventory/snapshots) stay links
            dst.symlink_to(os.readlink(src))
        elif src.is_file():  # a file deleted but not yet committed is listed too
            shutil.copy2(src, dst)
    (work / ".venv").symlink_to(ROOT / ".venv")
    env = dict(os.environ)
    env.update(
        PATH=f"{ROOT / '.venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        HOME=str(tmp_path / "home"),
        GPUFIX_STATE_DIR=str(tmp_path / "state"),
        COLUMNS="160",
        NO_COLOR="1",
    )
    (tmp_path / "home").mkdir()
    return work, env


def run(cmd: Command, cwd: Path, env: dict[str, str], timeout: int = 900) -> str | None:
    """None when the command did what the doc says; otherwise why not, in one paragraph."""
    try:
        r = subprocess.run(
            ["bash", "-c", cmd.text],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return f"{cmd.where()}: still running after {timeout} s"
    broken = "Traceback" in r.stderr or "internal error" in r.stderr
    if r.returncode == cmd.expect and not broken:
        return None
    tail = " | ".join(line for line in r.stderr.strip().splitlines()[-4:])
    out = " | ".join(line for line in r.stdout.strip().splitlines()[-6:])
    said = f"exit {r.returncode}, the doc says {cmd.expect}"
    return (
        f"{cmd.where()}: {said}{' (a traceback)' if broken else ''}; stderr: {tail}; stdout: {out}"
    )


# ------------------------------------------------------------------------------ the parser


def test_parse_reads_modes_codes_and_transcripts() -> None:
    text = "\n".join(
        [
            "```console",
            "$ gpufix plan host01                 # recorded host",
            "gpufix plan for host01",
            "$ gpufix plan host02 --strategy kernel-upgrade   # refused (exit 3)",
            "$ gpufix apply p.json",
            "output",
            "$ echo $?",
            "5",
            "```",
            "",
            "<!-- docs-test: lab -->",
            "```",
            "$ gpufix apply kernel-plan.json -i lab.yml; echo $?",
            "already applied",
            "0",
            "```",
            "$ not in a block",
        ]
    )
    got = [(c.line, c.text.split("#")[0].strip(), c.mode, c.expect) for c in parse(text, "x.md")]
    assert got == [
        (2, "gpufix plan host01", "plain", 0),
        (4, "gpufix plan host02 --strategy kernel-upgrade", "plain", 3),
        (5, "gpufix apply p.json", "plain", 5),
        (13, "gpufix apply kernel-plan.json -i lab.yml", "lab", 0),
    ]
    assert parse(text, "x.md")[0].transcript == ["gpufix plan for host01"]
    with pytest.raises(ValueError, match="unknown docs-test mode 'cloud'"):
        parse("<!-- docs-test: cloud -->\n```\n$ gpufix x\n```\n", "y.md")


# ------------------------------------------------------------------------------ the docs

PLAIN_DOCS = sorted({c.doc for c in commands("plain")})


@pytest.mark.slow
@pytest.mark.parametrize("doc", PLAIN_DOCS)
def test_documented_commands_run_as_written(doc: str, tmp_path: Path) -> None:
    work, env = workdir(tmp_path)
    failures = [f for c in commands("plain") if c.doc == doc and (f := run(c, work, env))]
    assert not failures, "\n".join(failures)


def test_lines_that_need_a_gpu_or_a_fleet_name_real_commands_and_options() -> None:
    """Lines that need a GPU host or SSH hosts cannot run here; each gpufix one still names a
    subcommand that exists and only options that subcommand has (a review, 2026-12-05: this
    test used to skip and could never fail)."""
    import shlex

    from gpufix.cli.app import main_group

    elsewhere = [c for c in commands("gpu") + commands("fleet")]
    checked = 0
    for c in elsewhere:
        words = shlex.split(c.text, comments=True)
        while words and "=" in words[0] and not words[0].startswith("-"):
            words.pop(0)  # VAR=value before the command
        if not words or words[0] != "gpufix":
            continue  # ansible, pip, ansible-builder: not gpufix's to check
        sub = main_group.commands.get(words[1])
        assert sub is not None, f"{c.where()}: no subcommand {words[1]!r}"
        known = {o for p in sub.params for o in (*p.opts, *p.secondary_opts)}
        unknown = [
            w.split("=")[0] for w in words[2:] if w.startswith("-") and w.split("=")[0] not in known
        ]
        assert not unknown, f"{c.where()}: {sub.name} has no {unknown}"
        checked += 1
    assert checked >= 10  # the operations guide's fleet lines


@pytest.mark.integration
@pytest.mark.slow
def test_lab_sessions_run_as_written(tmp_path: Path) -> None:
    """Every lab block, in document order, against one lab built for the test."""
    lab = commands("lab")
    if not lab:
        pytest.skip("no documented lab session")
    if shutil.which("podman") is None:
        containers.unavailable("podman not installed")
    work, env = workdir(tmp_path)
    env["GPUFIX_LAB_NAME"] = f"gpufix-docs-{os.getpid()}"  # this test's containers only
    lab_sh = ["bash", str(ROOT / "scripts" / "lab.sh")]
    failures: list[str] = []
    try:
        up = next((c for c in lab if LAB_LIFECYCLE.search(c.text)), None)
        if up is None or LAB_LIFECYCLE.search(up.text).group(1) != "up":  # type: ignore[union-attr]
            subprocess.run([*lab_sh, "up"], cwd=work, env=env, check=True)
        started = False
        for c in lab:
            action = LAB_LIFECYCLE.search(c.text)
            if action and (action.group(1) == "down" or started):
                continue  # one lab for every block; it goes down at the end
            started = started or bool(action)
            if (problem := run(c, work, env)) is not None:
                failures.append(problem)
    finally:
        subprocess.run([*lab_sh, "down"], cwd=work, env=env, check=False)
    assert not failures, "\n".join(failures)
