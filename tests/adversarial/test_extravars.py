"""What gpufix hands Ansible is data: a real ansible-playbook run (localhost) shows that a
Jinja payload in a variable is never evaluated, that variables never appear on a command line
(`ps`), and that the file that carries them is private and gone afterwards."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import pytest
from gpufix import runner
from gpufix.errors import InvalidInput

from .conftest import payloads

PLAYBOOK = """---
- name: Echo variables the way a role uses them
  hosts: all
  gather_facts: false
  tasks:
    - name: Template every variable into a task argument
      ansible.builtin.set_fact:
        gpufix_seen: "{{ gpufix_value }} {{ gpufix_list | join(',') }} {{ gpufix_map | to_json }}"
    - name: Loop over a mapping (keys and values become item.key / item.value)
      ansible.builtin.debug:
        msg: "{{ item.key }}={{ item.value }}"
      loop: "{{ gpufix_map | dict2items }}"
    - name: What ps shows while the play runs
      ansible.builtin.command: ps -eo args
      register: __ps
      changed_when: false
    - name: Report it
      ansible.builtin.set_fact:
        gpufix_ps: "{{ __ps.stdout }}"
        gpufix_vars_file: "{{ lookup('ansible.builtin.env', 'PWD') }}"
"""


@pytest.fixture
def local_inventory(tmp_path: Path) -> Path:
    inv = tmp_path / "local.yml"
    inv.write_text(
        "all:\n  hosts:\n    localhost:\n      ansible_connection: local\n"
        f"      ansible_python_interpreter: {sys.executable}\n"
    )
    return inv


@pytest.mark.slow
def test_payloads_in_variables_are_never_templated(
    tmp_path: Path, marker: Path, local_inventory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A temporary directory of this test's own: the other test streams run gpufix at the same
    # time, and their private directories come and go in the shared one.
    private_tmp = tmp_path / "tmp"
    private_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(private_tmp))
    book = tmp_path / "echo.yml"
    book.write_text(PLAYBOOK)
    p = payloads(marker)
    secret = "s3cr3t-value-never-on-a-command-line"
    extravars = {
        "gpufix_value": p[0],
        "gpufix_list": [p[0], p[1]],
        "gpufix_map": {p[0]: p[1], "k": p[0]},
        "gpufix_token": secret,
    }
    before = set(private_tmp.glob("gpufix-runner-*"))
    res = runner._run(
        inventory=local_inventory,
        progress=None,
        timeout=120,
        playbook=str(book),
        limit="localhost",
        extravars=extravars,
    )
    hr = res.hosts["localhost"]
    assert res.status == "successful", hr.message
    assert hr.data["gpufix_seen"].startswith(p[0])  # the text itself, not its evaluation
    assert secret not in hr.data["gpufix_ps"]  # not on any command line
    assert "-e @" in hr.data["gpufix_ps"] and "gpufix-extravars.yml" in hr.data["gpufix_ps"]
    after = set(private_tmp.glob("gpufix-runner-*"))
    assert after == before  # the private directory and its vars file are gone


def test_the_vars_file_is_private(tmp_path: Path) -> None:
    d = tmp_path / "run"
    d.mkdir(mode=0o700)
    path = runner.write_extravars(d, {"gpufix_x": "{{ 1 }}", "gpufix_n": 3, "gpufix_b": True})
    assert (path.stat().st_mode & 0o777) == 0o600
    text = path.read_text()
    assert "!unsafe '{{ 1 }}'" in text and "gpufix_n': 3" in text and "true" in text


@pytest.mark.parametrize(
    ("playbook", "extravars", "why"),
    [
        ("probe.yml", {"gpufix_probe_python": "/usr/bin/python3 -c 'import os'"}, "python"),
        ("probe.yml", {"gpufix_probe_python": "/tmp/evil"}, "python"),
        ("probe.yml", {"ansible_become_exe": "/tmp/evil"}, "not a gpufix variable"),
        ("probe.yml", {"gpufix_probe_user": "root; id"}, "account"),
        ("probe.yml", {"gpufix_probe_user": "{{ lookup('pipe', 'id') }}"}, "account"),
        ("probe.yml", {"gpufix_probe_job_env": ["NCCL_X={{ lookup('pipe', 'id') }}"]}, "job_env"),
        ("probe.yml", {"gpufix_probe_job_env": ["LD_PRELOAD=/tmp/evil.so"]}, "job_env"),
        ("probe_multinode.yml", {"gpufix_probe_job_env": ["NCCL_X=1 --cpu"]}, "job_env"),
        ("probe_multinode.yml", {"gpufix_probe_store_key": "k --cpu"}, "store_key"),
        ("probe_stop.yml", {"gpufix_probe_run_id": "x( |$)|.*"}, "store_key"),
        ("probe_stop.yml", {"gpufix_probe_store_key": "-f"}, "store_key"),
        (
            "probe_multinode.yml",
            {"gpufix_probe_store_key": "{{ lookup('pipe', 'id') }}"},
            "store_key",
        ),
        ("reboot.yml", {"gpufix_reboot_command": "touch M"}, "not a variable of"),
        ("rollback.yml", {"gpufix_rollback_remove": ["libc6; touch M"]}, "package"),
        ("rollback.yml", {"gpufix_rollback_kernel": "{{ 7 * 7 }}"}, "kernel_release"),
        (
            "rollback.yml",
            {
                "gpufix_rollback_files": {
                    "/etc/x": {"exists": True, "mode": "0644; id", "content_b64": ""}
                }
            },
            "file_mode",
        ),
        # an edited journal that drops a file's content would have rollback empty the file
        (
            "rollback.yml",
            {"gpufix_rollback_files": {"/etc/x": {"exists": True, "mode": "644"}}},
            "no content_b64",
        ),
        (
            "rollback.yml",
            {"gpufix_rollback_files": {"/etc/x": {"exists": True, "mode": "644", "size": 9}}},
            "a saved file is",
        ),
        ("nccl_profile.yml", {"gpufix_nccl_profile_extra": {"NCCL_X": "$(id)"}}, "nccl_value"),
        ("kernel_upgrade.yml", {"gpufix_kernel_packages": ["linux-image-5.4 ; id"]}, "package"),
        ("kernel_upgrade.yml", {"gpufix_kernel_reboot_allowed": "yes"}, "true or false"),
    ],
)
def test_every_playbook_variable_is_checked_before_a_run(
    playbook: str, extravars: dict, why: str, tmp_path: Path
) -> None:
    with pytest.raises(InvalidInput, match=why):
        runner.run_playbook(
            playbook, tmp_path / "no-inventory.yml", limit="h1", extravars=extravars
        )


@pytest.mark.parametrize("python", ["/usr/bin/python3 timeout=1", "python3;id", "{{ x }}", "a b"])
def test_facts_module_arguments_are_one_plain_word(python: str, tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="plain word"):
        runner.gather_facts("h1", tmp_path / "inv.yml", python_envs=[python])
