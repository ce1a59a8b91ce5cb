"""A hostile or broken Docker host: text the container_runtime role reads from it (`docker ps`,
`docker --version`, `nvidia-ctk --version`, docker.service's command line) and puts into facts,
debug messages and assert messages is shown as text, never evaluated as Jinja.

Real ansible-playbook runs of the role's task files on this machine (connection=local), with
stand-in `docker`, `nvidia-ctk` and `systemctl` first on PATH printing the payloads. Whether
dockerd runs comes from service_facts on a real host; here it is given as a variable. The
pending-change marker lives in tmp_path. The host's identity (os_family, distribution) comes from
a stand-in module that returns it as facts, as the setup module does."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from role_check import run_playbook

from .conftest import payloads


def _standins(tmp_path: Path, outputs: dict[str, str]) -> None:
    """`docker`, `nvidia-ctk` and `systemctl` that print outputs[their arguments' key] (a file
    each, so no payload passes through a shell word), and nothing else."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for key, text in outputs.items():
        (tmp_path / f"{key}.out").write_text(text)
    cases = {
        "docker": {"ps": "ps\\ *", "version": "--version"},
        "nvidia-ctk": {"ctk-version": "--version"},
        "systemctl": {"can-reload": "*CanReload*", "unit": "*ExecStart*"},
    }
    for tool, keys in cases.items():
        body = '#!/bin/sh\ncase "$*" in\n'
        for key, pattern in keys.items():
            if key in outputs:
                body += f"  {pattern}) cat '{tmp_path}/{key}.out' ;;\n"
        body += "esac\nexit 0\n"
        path = bindir / tool
        path.write_text(body)
        path.chmod(0o755)


def _play(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    tasks_from: str,
    fact: str,
    vars_: dict[str, Any],
    *,
    check: bool = False,
) -> tuple[subprocess.CompletedProcess[str], Any]:
    """Include the role's task file, then write the fact it sets to a file (as JSON)."""
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    result = tmp_path / "fact.json"
    book = tmp_path / "book.yml"
    book.write_text(
        "- hosts: localhost\n"
        "  gather_facts: true\n"
        "  tasks:\n"
        "    - ansible.builtin.include_role:\n"
        "        name: container_runtime\n"
        f"        tasks_from: {tasks_from}\n"
        "    - ansible.builtin.copy:\n"
        f"        content: '{{{{ {fact} | to_json }}}}'\n"
        f"        dest: {result}\n"
        "        mode: '0600'\n"
        "      check_mode: false\n"
    )
    out = run_playbook(tmp_path, book, vars_, check=check)
    return out, json.loads(result.read_text()) if result.is_file() else None


def test_container_names_in_the_operators_message_are_text(
    tmp_path: Path, marker: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """dockerd cannot reload, no consent to restart: the action names the running containers
    (`docker ps`); it is set as a fact and printed by debug, and the payloads stay text."""
    names = payloads(marker)[:2]
    _standins(tmp_path, {"ps": "\n".join(names) + "\n", "can-reload": "no\n"})
    out, daemon = _play(
        tmp_path,
        monkeypatch,
        "apply",
        "gpufix_container_runtime_daemon",
        {
            "__gpufix_container_runtime_daemon_changed": True,
            "_gpufix_container_runtime_running": True,
            "_gpufix_container_runtime_pending_marker": str(tmp_path / "state" / "pending"),
        },
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert daemon["applied_by"] == "pending" and daemon["blocked_by"] == "no consent"
    assert daemon["running_containers"] == names
    assert f"Stop the running containers ({names[0]}, {names[1]})" in daemon["action"]
    assert "Say what the operator must do" in out.stdout
    assert names[0] in out.stdout and names[1] in out.stdout  # the debug shows them as written


def test_versions_a_host_reports_are_text(
    tmp_path: Path, marker: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = payloads(marker)
    _standins(tmp_path, {"version": p[0] + "\n", "ctk-version": p[1] + "\n"})
    out, installed = _play(
        tmp_path, monkeypatch, "verify", "gpufix_container_runtime_installed", {}
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert installed == {"docker": p[0], "nvidia_ctk": p[1]}


def test_dockerds_command_line_is_searched_never_evaluated(
    tmp_path: Path, marker: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The preflight searches the unit's command line for flags daemon.json would contradict:
    a payload beside a real clash is neither run nor able to hide the clash."""
    unit = (
        "ExecStart={ path=/usr/bin/dockerd ; argv[]=/usr/bin/dockerd -H fd:// "
        f"--default-shm-size=1g {payloads(marker)[0]} {payloads(marker)[1]} ; }}\nMainPID=0\n"
    )
    _standins(tmp_path, {"unit": unit})
    out, _ = _play(
        tmp_path,
        monkeypatch,
        "preflight",
        "gpufix_container_runtime_engine_chosen",
        {"gpufix_container_runtime_default_shm_size": "16g"},
        check=True,
    )
    clash = "dockerd is given --default-shm-size on its command line"
    assert out.returncode != 0 and clash in out.stdout, out.stdout[-3000:]


def test_the_same_payload_runs_where_ansible_trusts_it(tmp_path: Path) -> None:
    """The control: written into a play (trusted text), the payload does run, so the tests above
    would see an evaluation if the role let host text be templated."""
    ran = tmp_path / "RAN"
    book = tmp_path / "trusted.yml"
    book.write_text(
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n"
        f'    - ansible.builtin.debug:\n        msg: "{payloads(ran)[0]}"\n'
    )
    out = run_playbook(tmp_path, book, {}, check=False)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert ran.exists()


# A module on the "host" that reports the host's identity facts from a file, as the setup module
# reports what /etc/os-release says: facts come back from the host, never from the play's text.
IDENTITY_MODULE = """\
#!/usr/bin/python
import json
from ansible.module_utils.basic import AnsibleModule

module = AnsibleModule(argument_spec={"src": {"type": "path", "required": True}},
                       supports_check_mode=True)
with open(module.params["src"]) as f:
    module.exit_json(changed=False, ansible_facts=json.load(f))
"""


def _role_as_host(tmp_path: Path, identity: dict[str, str]) -> tuple[str, dict[str, Any]]:
    """Run the whole role in check mode on a host whose identity facts are `identity`; when it
    fails, report the task, its message and what the role read (facts, the repository URI)."""
    (tmp_path / "identity.json").write_text(json.dumps(identity))
    (tmp_path / "library").mkdir()
    (tmp_path / "library" / "host_identity.py").write_text(IDENTITY_MODULE)
    report = tmp_path / "report.json"
    book = tmp_path / "book.yml"
    book.write_text(
        "- hosts: localhost\n"
        "  gather_facts: true\n"
        "  tasks:\n"
        "    - name: Report the host's identity\n"
        f"      host_identity: {{src: {tmp_path / 'identity.json'}}}\n"
        "    - name: The whole role, as a playbook runs it\n"
        "      block:\n"
        "        - ansible.builtin.include_role:\n"
        "            name: container_runtime\n"
        "            public: true\n"  # its defaults stay visible to the rescue
        "      rescue:\n"
        "        - ansible.builtin.copy:\n"
        "            content: >-\n"
        "              {{ {'task': ansible_failed_task.name, 'msg': ansible_failed_result.msg,\n"
        "                  'os_family': ansible_facts['os_family'],\n"
        "                  'repo': gpufix_container_runtime_docker_repo_uri} | to_json }}\n"
        f"            dest: {report}\n"
        "            mode: '0600'\n"
        "          check_mode: false\n"
    )
    out = run_playbook(tmp_path, book, {}, check=True)
    assert report.is_file(), out.stdout[-3000:] + out.stderr[-2000:]
    return out.stdout, json.loads(report.read_text())


def test_a_hosts_distribution_and_os_family_are_text(tmp_path: Path, marker: Path) -> None:
    """The host says it is a Jinja expression: os_family reaches the platform check's message
    and distribution the vars-file lookup and the default Docker repository URI (lowercased),
    each as the text the host sent; nothing runs."""
    lowered = tmp_path / "lowered"  # the distribution payload's target after `| lower`
    identity = {
        "os_family": payloads(marker)[0],
        "distribution": payloads(lowered)[1],
        "distribution_version": payloads(marker)[0],
    }
    _, seen = _role_as_host(tmp_path, identity)
    assert seen["os_family"] == identity["os_family"]  # the facts did reach the role
    assert seen["task"] == "Check the platform", seen
    assert seen["msg"] == (
        "container_runtime supports Debian-family hosts (Ubuntu, Debian), "
        f"not {identity['os_family']}."
    )
    assert seen["repo"] == "https://download.docker.com/linux/" + identity["distribution"].lower()
    assert not lowered.exists() and not lowered.with_name("LOWERED").exists()


def test_a_hosts_distribution_names_no_file_outside_the_role(tmp_path: Path) -> None:
    """Not evaluation but the same host text as a path: a distribution of ../../tmp/x/evil must
    not make include_vars read tmp/x/evil.yml on the controller. Here evil.yml sets a relative
    wrapper path, which the settings check refuses before the platform check would."""
    (tmp_path / "evil.yml").write_text("gpufix_container_runtime_wrapper_path: from-evil-yml\n")
    identity = {
        "os_family": "NotDebian",
        "distribution": "../" * 16 + str(tmp_path / "evil").lstrip("/"),
        "distribution_version": "1",
    }
    _, seen = _role_as_host(tmp_path, identity)
    assert seen["task"] == "Check the platform", seen
