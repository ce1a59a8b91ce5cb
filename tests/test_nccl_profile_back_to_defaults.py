"""The nccl-profile step that goes back to NCCL's defaults (strategies/nccl_profile.py
_back_to_defaults) really does so on a host whose administrator turned P2P and SHM off in
/etc/nccl.conf: the role keeps an original's other NCCL_* lines, and the step's extra settings
replace the "off" ones. Runs the role with ansible-playbook against localhost, on files in a
temporary directory."""

from __future__ import annotations

from pathlib import Path

import pytest
from role_check import role_book, run_playbook


@pytest.mark.slow
def test_the_administrators_offs_go_back_and_the_rest_stays(tmp_path: Path) -> None:
    conf, backup, single = tmp_path / "nccl.conf", tmp_path / "nccl.conf.orig", tmp_path / "s.sh"
    conf.write_text("NCCL_P2P_DISABLE=1\nNCCL_SHM_DISABLE=1\nNCCL_TOPO_FILE=/opt/topo.xml\n")
    book = role_book(tmp_path, "nccl_profile")
    r = run_playbook(
        tmp_path,
        book,
        {
            "gpufix_nccl_profile_names": ["default"],
            "gpufix_nccl_profile_extra": {"NCCL_P2P_DISABLE": "0", "NCCL_SHM_DISABLE": "0"},
            "gpufix_nccl_profile_conf_path": str(conf),
            "gpufix_nccl_profile_backup_path": str(backup),
            "gpufix_nccl_profile_single_gpu_path": str(single),
        },
        check=False,
    )
    assert r.returncode == 0, r.stdout[-3000:]
    lines = {ln for ln in conf.read_text().splitlines() if ln.startswith("NCCL_")}
    assert {"NCCL_P2P_DISABLE=0", "NCCL_SHM_DISABLE=0", "NCCL_TOPO_FILE=/opt/topo.xml"} <= lines
    assert not {"NCCL_P2P_DISABLE=1", "NCCL_SHM_DISABLE=1"} & lines
    assert "NCCL_P2P_DISABLE=1" in backup.read_text()  # the original is kept for rollback
