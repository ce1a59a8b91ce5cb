"""playbooks/rollback.yml removes gpufix's own venv when the journal says the run created it,
and nothing else: a real ansible-playbook run on this machine (connection=local) against a
venv under tmp_path (gpufix itself never passes the path: the playbook's default is
roles/ml_stack's /opt/gpufix/venv)."""

from __future__ import annotations

from pathlib import Path

import pytest
from role_check import ROOT, run_playbook


@pytest.mark.parametrize(
    ("remove", "check", "gone"), [(True, False, True), (True, True, False), (False, False, False)]
)
def test_the_venv_goes_only_when_the_run_created_it(
    tmp_path: Path, remove: bool, check: bool, gone: bool
) -> None:
    venv = tmp_path / "opt" / "gpufix" / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text("")
    (venv / "gpufix-constraints.txt").write_text("torch==2.1.2\n")
    book = tmp_path / "rollback.yml"
    book.write_text(f"- ansible.builtin.import_playbook: {ROOT / 'playbooks' / 'rollback.yml'}\n")
    vars_ = {
        "gpufix_rollback_ml_venv_remove": remove,
        "gpufix_rollback_ml_venv_path": str(venv),
        "ansible_become": False,
    }
    r = run_playbook(tmp_path, book, vars_, check=check)
    assert r.returncode == 0, r.stdout[-3000:]
    assert venv.exists() is not gone
    assert venv.parent.exists()  # only the venv itself
