"""The AWX playbooks show what gpufix printed: host messages in it are text. The display tasks
of playbooks/controller_apply.yml, taken from the file, run on gpufix's JSON output carrying a
Jinja payload a host could have put in its message (a real ansible-playbook, localhost)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import yaml
from role_check import ROOT, run_playbook

from .conftest import payloads


def test_a_payload_in_a_host_message_is_shown_not_run(tmp_path: Path, marker: Path) -> None:
    play = yaml.safe_load((ROOT / "playbooks" / "controller_apply.yml").read_text())[0]
    shown = [t for t in play["tasks"] if t["name"] == "Show each host's outcome"]
    assert shown, "controller_apply.yml has no display task"
    out = tmp_path / "apply.json"
    hosts = [{"host": f"h{i}", "state": "failed", "changed": 0, "message": p}
             for i, p in enumerate(payloads(marker))]  # fmt: skip
    out.write_text(json.dumps({"hosts": hosts}))
    book = tmp_path / "show.yml"
    register = {
        "name": "What gpufix apply --json printed",
        "ansible.builtin.command": {"argv": ["cat", str(out)]},
        "register": "__gpufix_controller_apply",
        "changed_when": False,
    }
    book.write_text(yaml.safe_dump([{"hosts": "localhost", "gather_facts": False,
                                     "tasks": [register, *shown]}]))  # fmt: skip
    r = run_playbook(tmp_path, book, {}, check=False)
    assert r.returncode == 0, r.stdout[-2000:]
    assert "touch " + str(marker) in r.stdout  # the payload, shown as text


def test_controller_apply_passes_its_switches_as_arguments(tmp_path: Path) -> None:
    """The AWX playbook's switches reach `gpufix apply` as separate arguments (a fake gpufix on
    PATH records its argv): the host-lock takeover only when asked for."""
    record = tmp_path / "argv.json"
    fake = tmp_path / "bin" / "gpufix"
    fake.parent.mkdir()
    fake.write_text(
        "#!/usr/bin/env python3\nimport json, sys\n"
        f"open({str(record)!r}, 'w').write(json.dumps(sys.argv[1:]))\n"
        "print(json.dumps({'hosts': []}))\n"
    )
    fake.chmod(0o755)
    env = {"PATH": f"{fake.parent}:{os.environ['PATH']}"}
    book = ROOT / "playbooks" / "controller_apply.yml"
    for force, want in ((False, []), (True, ["--force", "host-lock"])):
        got = {"gpufix_plan_file": "/var/lib/gpufix/plan.json", "gpufix_force_host_lock": force}
        r = run_playbook(tmp_path, book, got, check=False, env=env)
        assert r.returncode == 0, r.stdout[-2000:]
        argv = json.loads(record.read_text())
        assert argv[:2] == ["apply", "/var/lib/gpufix/plan.json"] and "--yes" in argv
        assert argv[argv.index("--batch") + 2 :] == want, argv
