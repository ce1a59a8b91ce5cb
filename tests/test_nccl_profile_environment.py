"""An NCCL profile in /etc/nccl.conf does not reach a job whose environment sets the variable:
NCCL loads its config file with setenv(var, value, 0), which never overwrites a set variable
(NVIDIA/nccl src/misc/param.cc, setEnvFile). An expert review (2026-12-06) found five corpus
plans that wrote a profile the facts' own environment (nccl.env) overrode, silently; and one
that wrote NCCL_SOCKET_IFNAME=lo host-wide with the cost "none", though loopback reaches no
other host."""

from __future__ import annotations

import copy
import json
from datetime import date
from functools import partial
from pathlib import Path
from typing import Any

from corpus.harness import cases
from corpus.snapshot import snapshot_for
from corpus.verdict import verdict_for
from gpufix.engine import decide as engine
from gpufix.engine.context import Constraints
from gpufix.engine.kb import load
from gpufix.engine.rules import load as load_rules

HOSTS = Path(__file__).parent / "fixtures" / "hosts"
DAY = Constraints(plan_date=date(2026, 12, 6))
decide = partial(engine.decide, kb=load(), rules=load_rules(), constraints=DAY)


def host03(env: dict[str, str]) -> dict[str, Any]:
    """focal-4x4090: RTX 4090s have no PCIe P2P, so the plan writes the no-p2p profile."""
    f = copy.deepcopy(json.loads((HOSTS / "focal-4x4090.json").read_text())["facts"])
    f["nccl"]["env"] = env
    return f


def test_an_environment_that_sets_the_profiles_variable_otherwise_is_named() -> None:
    plan = decide(host03({"NCCL_P2P_DISABLE": "0"}))
    assert plan.strategy == "nccl-profile"
    [line] = [r for r in plan.risks if "the environment gpufix read sets" in r]
    assert "NCCL_P2P_DISABLE=0" in line and "only for variables not in the environment" in line


def test_the_same_value_in_the_environment_is_no_risk() -> None:
    plan = decide(host03({"NCCL_P2P_DISABLE": "1"}))
    assert not any("the environment gpufix read sets" in r for r in plan.risks)


def test_loopback_as_the_socket_interface_says_it_is_for_one_host_only() -> None:
    case = next(c for c in cases() if c["id"] == "nccl-1608-h100-nvl-socket-ifname-lo")
    snap = snapshot_for(case)
    verdict, _ = verdict_for(case, len(snap["facts"]["gpus"]))
    plan = decide(snap["facts"], verdict)
    assert plan.steps[0].vars["gpufix_nccl_profile_socket_ifname"] == "lo"
    assert any("a job across hosts started here cannot connect" in r for r in plan.risks)
    assert any("NCCL_SOCKET_IFNAME=eth0" in r for r in plan.risks)  # the thread's own setting


def test_a_hostile_environment_value_is_one_line_of_text_in_the_plan(tmp_path: Path) -> None:
    """nccl.env is data from the host: its value reaches the plan's risk line only as one
    truncated line, never as markup, a template or a step variable (through the real CLI)."""
    import subprocess
    import sys

    doc = json.loads((HOSTS / "focal-4x4090.json").read_text())
    payload = "[bold red]x[/] {{ 7*7 }} $(touch /tmp/gpufix-pwned)\nINJECTED " + "y" * 300
    doc["facts"]["nccl"]["env"] = {"NCCL_P2P_DISABLE": payload}
    snap = tmp_path / "s.json"
    snap.write_text(json.dumps(doc))
    args = [sys.executable, "-m", "gpufix", "plan", "host03", "--facts", str(snap)]
    import os

    wide = {**os.environ, "COLUMNS": "400"}  # the value stays on one printed line
    text = subprocess.run(args, capture_output=True, text=True, timeout=120, check=False, env=wide)
    js = subprocess.run([*args, "--json"], capture_output=True, text=True, timeout=120, check=False)
    assert text.returncode == 0 and js.returncode == 0, text.stderr + js.stderr
    plan = json.loads(js.stdout)["plans"][0]
    [line] = [r for r in plan["risks"] if "the environment gpufix read sets" in r]
    assert "\n" not in line and "INJECTED" in line and "y" * 200 not in line  # one truncated line
    assert "[bold red]x[/]" in text.stdout  # printed as written, not as markup
    assert "49" not in line and not Path("/tmp/gpufix-pwned").exists()
    assert payload not in json.dumps(plan["steps"])  # not a step variable
