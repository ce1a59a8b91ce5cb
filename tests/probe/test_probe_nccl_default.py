"""`--nccl-default VAR`: the verification of a permanent fix runs without the interim's "off".

An interim nccl-profile leaves NCCL_P2P_DISABLE=1 in /etc/nccl.conf. NCCL reads that file only
for variables not in the environment (src/misc/param.cc, setEnvFile: setenv(var, value, 0)), so
the probe puts NCCL's default in the ranks' environment. Here the interim's setting is in the
environment itself (gloo reads no nccl.conf), and the test-only fault stands in for the broken
P2P path: it clears only under NCCL_P2P_DISABLE=1, as the interim hides it on a real host.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import probe_env
from gpufix.probe import run_local
from gpufix.probe.local import load_program
from workers import leftovers

pytest.importorskip("torch", reason="needs torch (CPU build is enough)")

BASE = ["--cpu", "--no-single-gpu", "--world-size", "2", "--import-deadline", "60"]
BASE += ["--deadline", "90", "--no-experiments"]
# The run that must come out healthy gets room on a loaded machine; the stalled one a short wait.
ROOMY, SHORT = ["--phase-deadline", "30"], ["--phase-deadline", "6"]
FAULT = "stall:pg_init:*;unless=NCCL_P2P_DISABLE=1"


@pytest.mark.slow
def test_the_interims_setting_hides_the_fault_and_the_default_shows_it(tmp_path: Path) -> None:
    env = {**probe_env(tmp_path, FAULT), "NCCL_P2P_DISABLE": "1"}  # the interim, as NCCL sees it
    hidden = run_local(args=[*BASE, *ROOMY], env=env)
    shown = run_local(args=[*BASE, *SHORT, "--nccl-default", "NCCL_P2P_DISABLE"], env=env)
    assert leftovers(str(tmp_path)) == []

    assert hidden["verdict"] == "healthy"
    assert shown["verdict"] == "hung" and shown["stalled"]["phase"] == "pg_init"
    assert any("NCCL_P2P_DISABLE=0" in n for n in shown["notes"]), shown["notes"]


@pytest.mark.parametrize(
    "var", ["NCCL_P2P_LEVEL", "LD_PRELOAD", "NCCL_P2P_DISABLE=0", "nccl_p2p_disable", ""]
)
def test_only_settings_with_an_off_value_default_are_taken(var: str) -> None:
    prog = load_program()
    ns = prog.build_parser().parse_args(["--cpu", "--nccl-default", var])
    with pytest.raises(prog.ArgError, match="--nccl-default"):
        prog.check_args(ns)


def test_the_verdict_names_the_nccl_config_files_the_ranks_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """NCCL reads NCCL_CONF_FILE or $HOME/.nccl.conf, then /etc/nccl.conf: the probe, run with the
    training account's HOME (roles/probe gpufix_probe_user), says which it found."""
    prog = load_program()
    monkeypatch.delenv("NCCL_CONF_FILE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    etc = Path("/etc/nccl.conf").is_file()
    assert (prog.nccl_conf_note() is None) == (not etc)
    (tmp_path / ".nccl.conf").write_text("NCCL_P2P_DISABLE=1\n")
    note = prog.nccl_conf_note()
    assert note is not None and f"HOME={tmp_path}" in note and f"{tmp_path}/.nccl.conf" in note
    other = tmp_path / "site.conf"
    other.write_text("NCCL_IB_DISABLE=1\n")
    monkeypatch.setenv("NCCL_CONF_FILE", str(other))
    note = prog.nccl_conf_note()
    assert note is not None and str(other) in note and ".nccl.conf" not in note
