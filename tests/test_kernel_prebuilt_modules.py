"""roles/kernel/tasks/prebuilt.yml: where the driver uses Canonical's prebuilt modules for the
running kernel, which linux-modules-nvidia-* packages the role installs for the target kernel,
decided from recorded `apt-get --simulate` answers. Real ansible-playbook runs in check mode on
this machine (connection=local); apt-get is a stand-in on PATH that answers from tmp_path, and
the installed packages are given as facts."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from role_check import run_playbook

RUNNING = "4.15.0-213-generic"
TARGET = "5.4.0-150-generic"
MODULE = f"linux-modules-nvidia-535-{TARGET}"
META = "linux-modules-nvidia-535-generic-hwe-18.04"
INSTALLED = {
    "nvidia-driver-535": "535.183.01-0ubuntu0.18.04.1",
    "nvidia-kernel-common-535": "535.183.01-0ubuntu0.18.04.1",
    f"linux-modules-nvidia-535-{RUNNING}": "4.15.0-213.224",
    "linux-modules-nvidia-535-generic": "4.15.0-213.224",
}
FITS = f"Inst {MODULE} (5.4.0-150.167~18.04.1 localrepo [all])\nConf {MODULE} (5.4.0-150.167~18.04.1)\n"
META_FITS = f"Inst {META} (5.4.0-150.167~18.04.1 localrepo [all])\n"
# apt 1.6's answer for a module built for 535.216.01 on a host with 535.183.01 (tight Depends).
UNMET = (
    "Some packages could not be installed.\nThe following packages have unmet dependencies:\n"
    f" {MODULE} : Depends: nvidia-kernel-common-535 (>= 535.216.01) but"
    " 535.183.01-0ubuntu0.18.04.1 is to be installed\n"
    "E: Unable to correct problems, you have held broken packages.\n"
)
UPGRADES = (
    "Inst nvidia-kernel-common-535 [535.183.01-0ubuntu0.18.04.1] (535.216.01-0ubuntu0.18.04.1 x [all])\n"
    + FITS
)
MISSING = f"E: Unable to locate package {META}\n"

APT_GET = """#!/bin/sh
# stand-in: `apt-get --simulate --quiet install PKG...` answers from $ANSWERS/PKG+PKG.{out,rc}
shift 3
key=$(printf '%s+' "$@")
key=${key%+}
echo "$key" >> "$ANSWERS/asked"
[ -f "$ANSWERS/$key.out" ] || { echo "E: Unable to locate package $1"; exit 100; }
cat "$ANSWERS/$key.out"
exit "$(cat "$ANSWERS/$key.rc")"
"""

FACTS_MODULE = """#!/usr/bin/python3
import json, sys
from ansible.module_utils.basic import AnsibleModule
m = AnsibleModule(argument_spec={"packages": {"type": "dict"}}, supports_check_mode=True)
m.exit_json(changed=False, ansible_facts={"packages": m.params["packages"]})
"""


def decide(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    answers: dict[str, tuple[str, int]],
    extra: dict[str, Any] | None = None,
) -> tuple[dict[str, Any], list[str]]:
    stub = tmp_path / "bin"
    stub.mkdir()
    (stub / "apt-get").write_text(APT_GET)
    (stub / "apt-get").chmod(0o755)
    lib = tmp_path / "library"
    lib.mkdir()
    (lib / "gpufix_test_facts.py").write_text(FACTS_MODULE)
    ans = tmp_path / "answers"
    ans.mkdir()
    for key, (out, rc) in answers.items():
        (ans / f"{key}.out").write_text(out)
        (ans / f"{key}.rc").write_text(str(rc))
    monkeypatch.setenv("PATH", f"{stub}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("ANSWERS", str(ans))
    monkeypatch.setenv("ANSIBLE_LIBRARY", str(lib))
    packages = {n: [{"name": n, "version": v}] for n, v in INSTALLED.items()}
    result = tmp_path / "decision.json"
    book = tmp_path / "book.yml"
    book.write_text(
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n"
        "    - gpufix_test_facts:\n"
        f"        packages: {json.dumps(packages)}\n"
        "    - block:\n"
        "        - ansible.builtin.include_role: {name: kernel, tasks_from: prebuilt}\n"
        "          vars:\n"
        f"            _gpufix_kernel_running: {RUNNING}\n"
        f"            _gpufix_kernel_target: {TARGET}\n"
        "            _gpufix_kernel_image_metapackage: linux-image-generic-hwe-18.04\n"
        # this machine's apt has no such package: the install task (last) fails after the decision
        "      rescue:\n"
        "        - ansible.builtin.assert:\n"
        "            that: ansible_failed_task.name is search('Install Canonical')\n"
        "    - ansible.builtin.copy:\n"
        '        content: \'{{ {"install": _gpufix_kernel_lrm_install, "why": _gpufix_kernel_lrm_why} | to_json }}\'\n'
        f"        dest: {result}\n"
        "        mode: '0644'\n"
        "      check_mode: false\n"
    )
    out = run_playbook(tmp_path, book, extra or {}, check=True)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    asked = (ans / "asked").read_text().split() if (ans / "asked").exists() else []
    decision: dict[str, Any] = json.loads(result.read_text())
    return decision, asked


def test_module_and_metapackage_that_leave_the_driver_alone_are_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found, asked = decide(tmp_path, monkeypatch, {f"{MODULE}+{META}": (FITS + META_FITS, 0)})
    assert found == {"install": [MODULE, META], "why": []}
    assert asked == [f"{MODULE}+{META}"]


def test_a_module_built_for_another_driver_version_is_refused_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found, _ = decide(
        tmp_path, monkeypatch, {f"{MODULE}+{META}": (UNMET, 100), MODULE: (UNMET, 100)}
    )
    assert found["install"] == []
    (why,) = found["why"]
    assert why.startswith(f"{MODULE} is built for another driver version")
    assert "Depends: nvidia-kernel-common-535 (>= 535.216.01)" in why


def test_a_module_that_would_upgrade_the_driver_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found, _ = decide(
        tmp_path, monkeypatch, {f"{MODULE}+{META}": (UPGRADES, 0), MODULE: (UPGRADES, 0)}
    )
    assert found["install"] == []
    (why,) = found["why"]
    assert "apt would change the driver (Inst nvidia-kernel-common-535 [535.183.01" in why


def test_the_module_alone_when_the_metapackage_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found, asked = decide(
        tmp_path, monkeypatch, {f"{MODULE}+{META}": (MISSING, 100), MODULE: (FITS, 0)}
    )
    assert found == {"install": [MODULE], "why": []}
    assert asked == [f"{MODULE}+{META}", MODULE]


def test_a_module_not_in_the_sources_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found, _ = decide(tmp_path, monkeypatch, {})
    assert found["install"] == []
    assert found["why"] == [f"{MODULE} is in none of this host's apt sources"]


def test_nothing_is_asked_when_turned_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    found, asked = decide(tmp_path, monkeypatch, {}, {"gpufix_kernel_prebuilt_modules": False})
    assert found == {"install": [], "why": []}
    assert asked == []


def test_the_refusal_says_canonicals_module_is_for_another_driver_version(tmp_path: Path) -> None:
    module = {
        "ok": False,
        "problem": f"no NVIDIA kernel module for it (modinfo -k {TARGET} nvidia finds none)",
        "driver": "535.183.01",
        "dkms": [],
        "secure_boot": False,
    }
    why = f"{MODULE} is built for another driver version: apt cannot install it with the installed driver (...)"
    book = tmp_path / "book.yml"
    book.write_text(
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n"
        "    - ansible.builtin.include_role: {name: kernel, tasks_from: decide}\n"
    )
    vars_ = {
        "_gpufix_kernel_target": TARGET,
        "_gpufix_kernel_running": RUNNING,
        "gpufix_kernel_reboot_allowed": True,
        "gpufix_kernel_nvidia_module": module,
        "_gpufix_kernel_lrm_why": [why],
    }
    out = run_playbook(tmp_path, book, vars_, check=True)
    assert out.returncode != 0
    text = " ".join(out.stdout.split())
    assert (
        f"finds none). Canonical's prebuilt module: {why}. Install linux-modules-nvidia-BRANCH-{TARGET}"
        in text
    ), text[-2000:]
