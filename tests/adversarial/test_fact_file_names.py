"""A host's facts never name a file the controller opens: every first_found list of vars files
built from `ansible_facts` keeps only plain file names (docs/security.md). The container_runtime
role is attacked for real in test_container_runtime_messages.py; this holds the other roles to
the same filter, and evaluates the filter itself with Ansible's Jinja environment."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
FILTER = "select('match', '^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}[.]yml$') | reject('search', '[.][.]')"


def _first_found_lists() -> list[tuple[str, object]]:
    out = []
    for path in sorted((ROOT / "roles").glob("*/tasks/*.yml")):
        for task in yaml.safe_load(path.read_text()) or []:
            if not isinstance(task, dict) or "ansible.builtin.include_vars" not in task:
                continue
            for value in (task.get("vars") or {}).values():
                if isinstance(value, dict) and "files" in value:
                    out.append((str(path.relative_to(ROOT)), value["files"]))
    return out


def test_every_vars_file_list_from_facts_is_filtered() -> None:
    found = _first_found_lists()
    assert len(found) >= 5, found  # container_runtime, driver, kernel, ml_stack, pcie_acs
    for where, files in found:
        text = files if isinstance(files, str) else yaml.safe_dump(files)
        if "ansible_facts" in text:
            assert isinstance(files, str) and " ".join(FILTER.split()) in " ".join(text.split()), (
                where
            )


@pytest.mark.parametrize(
    ("distribution", "kept"),
    [
        ("Ubuntu", ["Ubuntu-18.04.yml", "Ubuntu.yml", "Debian.yml", "main.yml"]),
        ("../../tmp/x/evil", ["Debian.yml", "main.yml"]),
        ("..", ["Debian.yml", "main.yml"]),
        ("Linux Mint", ["Debian.yml", "main.yml"]),
    ],
)
def test_the_filter_keeps_plain_names_only(distribution: str, kept: list[str]) -> None:
    # In a child process: importing ansible here would fix ansible.constants for every later
    # test in this process before gpufix.inventory sets its quiet settings.
    facts = {"distribution": distribution, "distribution_version": "18.04", "os_family": "Debian"}
    expr = (
        "{{ [ansible_facts['distribution'] ~ '-' ~ ansible_facts['distribution_version'] ~ '.yml',"
        " ansible_facts['distribution'] ~ '.yml', ansible_facts['os_family'] ~ '.yml', 'main.yml']"
        f" | {FILTER} | list }}}}"
    )
    code = (
        "import json, sys\n"
        "from ansible.parsing.dataloader import DataLoader\n"
        "from ansible.template import Templar\n"
        "facts, expr = json.loads(sys.argv[1]), sys.argv[2]\n"
        "t = Templar(loader=DataLoader(), variables={'ansible_facts': facts})\n"
        "print(json.dumps(t.template(expr)))\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, json.dumps(facts), expr],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == kept
