"""The ml_stack role refuses, before any change, a torch release that publishes no wheel for the
interpreter's Python or needs a newer glibc than the host's. Runs the role's preflight with
ansible-playbook against localhost in check mode; the "interpreter" is a script that prints what
bionic's, focal's or noble's python3 prints (Python 3.6 on glibc 2.27, 3.8 on 2.31, 3.12 on 2.39)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from role_check import run_playbook, run_tasks

BASE = {
    "gpufix_ml_stack_torch_variant": "cu121",
    "gpufix_ml_stack_transformers_version": "4.36.2",
    "gpufix_ml_stack_accelerate_version": "0.25.0",
    "gpufix_ml_stack_check_driver": False,
}


def interpreter(tmp_path: Path, python: str, glibc: str) -> str:
    exe = tmp_path / f"python{python}"
    exe.write_text(f"#!/bin/sh\nprintf '%s\\n' '{python}' 'glibc {glibc}'\n")
    exe.chmod(0o755)
    return str(exe)


def preflight(
    tmp_path: Path, python: str, glibc: str, **vars_: object
) -> subprocess.CompletedProcess[str]:
    vars_ = {**BASE, "gpufix_ml_stack_python": interpreter(tmp_path, python, glibc), **vars_}
    return run_tasks(tmp_path, "ml_stack", "preflight", vars_)


@pytest.mark.slow
def test_the_default_torch_is_refused_on_bionics_python(tmp_path: Path) -> None:
    r = preflight(tmp_path, "3.6", "2.27", gpufix_ml_stack_torch_version="2.1.2")
    out = r.stdout + r.stderr
    assert r.returncode != 0, out[-3000:]
    assert "torch 2.1.2+cu121 publishes Linux wheels for Python 3.8-3.11" in out
    assert "is Python 3.6 on glibc 2.27. Nothing was installed." in out
    # what does fit: the last releases for Python 3.6
    assert "(1.8, 1.9, 1.10)" in out


@pytest.mark.slow
def test_a_manylinux_2_28_torch_is_refused_on_glibc_2_27(tmp_path: Path) -> None:
    # a newer interpreter (deadsnakes' 3.9, say) does not lift the glibc floor
    r = preflight(tmp_path, "3.9", "2.27", gpufix_ml_stack_torch_version="2.7.1",
                  gpufix_ml_stack_torch_variant="cu118")  # fmt: skip
    out = r.stdout + r.stderr
    assert r.returncode != 0 and "needing glibc 2.28 or newer" in out, out[-3000:]
    assert "(2.4, 2.5, 2.6)" in out
    # 2.6's cu126 build is manylinux_2_28 too, its cu124 build is not
    r = preflight(tmp_path, "3.9", "2.27", gpufix_ml_stack_torch_version="2.6.0",
                  gpufix_ml_stack_torch_variant="cu126")  # fmt: skip
    assert r.returncode != 0 and "needing glibc 2.28 or newer" in r.stdout, r.stdout[-3000:]
    r = preflight(tmp_path, "3.9", "2.27", gpufix_ml_stack_torch_version="2.6.0",
                  gpufix_ml_stack_torch_variant="cu124")  # fmt: skip
    assert r.returncode == 0, r.stdout[-3000:]


@pytest.mark.slow
def test_noble_python_needs_a_torch_built_for_3_12(tmp_path: Path) -> None:
    r = preflight(tmp_path, "3.12", "2.39", gpufix_ml_stack_torch_version="2.1.2")
    assert r.returncode != 0 and "Python 3.12 on glibc 2.39" in r.stdout, r.stdout[-3000:]
    assert (
        preflight(tmp_path, "3.12", "2.39", gpufix_ml_stack_torch_version="2.2.2").returncode == 0
    )
    assert preflight(tmp_path, "3.8", "2.31", gpufix_ml_stack_torch_version="2.4.1").returncode == 0


@pytest.mark.slow
def test_unknown_releases_and_own_builds_are_not_checked(tmp_path: Path) -> None:
    # a release the table does not list, and a wheelhouse of one's own builds
    assert preflight(tmp_path, "3.6", "2.27", gpufix_ml_stack_torch_version="9.9.0").returncode == 0
    r = preflight(tmp_path, "3.6", "2.27", gpufix_ml_stack_torch_version="2.1.2",
                  gpufix_ml_stack_check_wheels=False)  # fmt: skip
    assert r.returncode == 0, r.stdout[-3000:]


@pytest.mark.slow
def test_odd_interpreter_output_is_data_not_a_version(tmp_path: Path) -> None:
    # what the interpreter prints is host data: a line that is no version skips the check, and a
    # glibc that is no version counts as unknown (a Jinja expression in it is never evaluated)
    assert (
        preflight(tmp_path, "{{ 7 * 7 }}", "2.27", gpufix_ml_stack_torch_version="2.1.2").returncode
        == 0
    )
    r = preflight(
        tmp_path, "3.6", "{{ lookup('env', 'HOME') }}", gpufix_ml_stack_torch_version="2.1.2"
    )
    assert r.returncode != 0 and "is Python 3.6 on glibc ?." in r.stdout, r.stdout[-3000:]
    assert "/root" not in r.stdout.split("is Python 3.6")[1][:40]


@pytest.mark.slow
def test_the_venvs_answer_is_data_in_verify(tmp_path: Path) -> None:
    # what the venv's python prints (versions, a NumPy error text) is host data: a Jinja lookup
    # in it reaches the failure message as text and never runs on the controller
    bindir = tmp_path / "venv" / "bin"
    bindir.mkdir(parents=True)
    marks = [tmp_path / "ran-1", tmp_path / "ran-2"]
    found = {
        "torch": "2.1.2+cu121", "cuda": "12.1", "transformers": "4.36.2",
        "accelerate": "0.25.0",
        "numpy": f"{{{{ lookup('pipe', 'touch {marks[0]}') }}}}",
        "numpy_problem": f"{{{{ lookup('pipe', 'touch {marks[1]}') }}}}",
    }  # fmt: skip
    (bindir / "python").write_text(f"#!/bin/sh\ncat <<'END'\n{json.dumps(found)}\nEND\n")
    (bindir / "python").chmod(0o755)
    book = tmp_path / "verify.yml"
    book.write_text(
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n"
        "    - ansible.builtin.include_role:\n        name: ml_stack\n        tasks_from: verify\n"
    )
    r = run_playbook(tmp_path, book, {**BASE, "gpufix_ml_stack_venv": str(tmp_path / "venv"),
                                      "gpufix_ml_stack_torch_version": "2.1.2"}, check=False)  # fmt: skip
    out = r.stdout
    assert r.returncode != 0 and "torch cannot convert NumPy {{ lookup(" in out, out[-3000:]
    assert not any(m.exists() for m in marks)
