"""Run one task file of a role against this machine in check mode (connection=local), for tests
that check what a role asserts before it changes anything."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def run_tasks(
    tmp_path: Path, role: str, tasks_from: str, vars_: dict[str, Any]
) -> subprocess.CompletedProcess[str]:
    """ansible-playbook --check on localhost with `vars_` as extra variables (a JSON file)."""
    book = tmp_path / f"{tasks_from}.yml"
    book.write_text(
        "- hosts: localhost\n"
        "  gather_facts: true\n"
        "  tasks:\n"
        "    - ansible.builtin.include_role:\n"
        f"        name: {role}\n"
        f"        tasks_from: {tasks_from}\n"
    )
    return run_playbook(tmp_path, book, vars_, check=True)


def role_book(tmp_path: Path, role: str) -> Path:
    """A playbook on localhost that includes the whole role, without gathering facts."""
    book = tmp_path / "play.yml"
    book.write_text(
        "- hosts: localhost\n"
        "  gather_facts: false\n"
        "  tasks:\n"
        "    - ansible.builtin.include_role:\n"
        f"        name: {role}\n"
    )
    return book


def run_playbook(
    tmp_path: Path,
    book: Path,
    vars_: dict[str, Any],
    check: bool,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """ansible-playbook on localhost (connection=local) with `vars_` as extra variables; `env`
    overrides the environment (this checkout's ansible.cfg by default)."""
    extra = tmp_path / "vars.json"
    extra.write_text(json.dumps({**vars_, "ansible_python_interpreter": sys.executable}))
    environ = {
        **os.environ,
        "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
        "ANSIBLE_NOCOLOR": "1",
        **(env or {}),
    }
    return subprocess.run(
        ["ansible-playbook", "-i", "localhost,", "-c", "local", *(["--check"] if check else []),
         "-e", f"@{extra}", str(book)],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )  # fmt: skip
