"""A debugging knob left in /etc/nccl.conf (override:tuning) comes out. The plan said "back to
NCCL's defaults" and wrote the default profile, but the role keeps an original's NCCL_* lines
that no profile sets, so NCCL_ALGO or NCCL_GRAPH_FILE stayed (a review, 2026-12-07: Azure NCv4
images set NCCL_GRAPH_FILE in /etc/nccl.conf, and NCCL failed with fewer GPUs than the graph
names; NVIDIA/nccl#1008, Azure/azurehpc#730). The step names the knobs the role drops; a knob
the environment sets is for the operator to take out."""

from __future__ import annotations

import copy
import json
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from gpufix.engine import decide as engine
from gpufix.engine.kb import load
from gpufix.engine.rules import load as load_rules
from role_check import role_book, run_playbook

decide = partial(engine.decide, kb=load(), rules=load_rules())
HOSTS = Path(__file__).resolve().parent / "fixtures" / "hosts"
GRAPH = "/opt/microsoft/ncv4/graph.xml"
FAILED = {"format": "gpufix-probe", "version": 1, "verdict": "failed", "backend": "nccl",
          "world_size": 2, "stalled": None, "failed_in": {"phase": "pg_init", "ranks": [0, 1]},
          "error": "ncclSystemError: System call (e.g. socket, malloc) or external library "
                   "call failed or device error.",
          "causes": [], "experiments": [], "decided_by": None}  # fmt: skip


def azure_host() -> dict[str, Any]:
    f: dict[str, Any] = copy.deepcopy(
        json.loads((HOSTS / "bionic-hwe-8xa100.json").read_text())["facts"]
    )
    f["nccl"]["files"]["/etc/nccl.conf"].update(
        {"NCCL_TOPO_FILE": "/opt/microsoft/ncv4/topo.xml", "NCCL_GRAPH_FILE": GRAPH}
    )
    return f


def test_a_graph_file_in_nccl_conf_is_taken_out() -> None:
    plan = decide(azure_host(), FAILED)
    assert plan.extra["decision"]["row"] == "override-tuning"
    (step,) = plan.steps
    assert step.vars == {"gpufix_nccl_profile_names": ["default"],
                         "gpufix_nccl_profile_drop": ["NCCL_GRAPH_FILE"]}  # fmt: skip
    assert step.description.endswith("without NCCL_GRAPH_FILE")


def test_a_knob_the_environment_sets_is_for_the_operator() -> None:
    f = azure_host()
    f["nccl"]["env"] = {"NCCL_ALGO": "Ring"}
    plan = decide(f, FAILED)
    (step,) = plan.steps
    assert step.vars["gpufix_nccl_profile_drop"] == ["NCCL_GRAPH_FILE"]
    assert any(r.startswith("NCCL_ALGO=Ring is set in the environment") for r in plan.risks)


def test_only_in_the_environment_the_operator_takes_it_out() -> None:
    """The row's fix stands (NeMo#9146, vLLM#19613 in the corpus: the knob came out of the
    job's environment), and the plan says the step cannot do it."""
    f = azure_host()
    del f["nccl"]["files"]["/etc/nccl.conf"]["NCCL_GRAPH_FILE"]
    f["nccl"]["env"] = {"NCCL_GRAPH_FILE": GRAPH}
    plan = decide(f, FAILED)
    assert plan.strategy == "nccl-profile"
    (step,) = plan.steps
    assert "gpufix_nccl_profile_drop" not in step.vars
    assert plan.outcome.startswith(f"NCCL_GRAPH_FILE={GRAPH} is set in the environment")
    assert "as the step cannot" in plan.outcome


@pytest.mark.slow
def test_the_role_drops_the_named_knobs_and_keeps_the_rest(tmp_path: Path) -> None:
    conf, backup, single = tmp_path / "nccl.conf", tmp_path / "nccl.conf.orig", tmp_path / "s.sh"
    conf.write_text(f"NCCL_TOPO_FILE=/opt/topo.xml\nNCCL_GRAPH_FILE={GRAPH}\nNCCL_ALGO=Tree\n")
    book = role_book(tmp_path, "nccl_profile")
    common = {
        "gpufix_nccl_profile_names": ["default"],
        "gpufix_nccl_profile_conf_path": str(conf),
        "gpufix_nccl_profile_backup_path": str(backup),
        "gpufix_nccl_profile_single_gpu_path": str(single),
    }
    bad = run_playbook(tmp_path, book, {**common, "gpufix_nccl_profile_drop": ["x; rm -rf /"]},
                       check=False)  # fmt: skip
    assert bad.returncode != 0 and "takes NCCL_* names" in bad.stdout
    assert conf.read_text().startswith("NCCL_TOPO_FILE")  # refused before any change
    drop = ["NCCL_GRAPH_FILE", "NCCL_ALGO"]
    r = run_playbook(tmp_path, book, {**common, "gpufix_nccl_profile_drop": drop}, check=False)
    assert r.returncode == 0, r.stdout[-3000:]
    lines = {ln for ln in conf.read_text().splitlines() if ln.startswith("NCCL_")}
    assert lines == {"NCCL_TOPO_FILE=/opt/topo.xml"}
    assert "NCCL_GRAPH_FILE" in backup.read_text()  # the original is kept for rollback
    again = run_playbook(tmp_path, book, {**common, "gpufix_nccl_profile_drop": drop}, check=False)
    assert again.returncode == 0 and "changed=0" in again.stdout


def test_without_a_probe_the_knob_is_a_warning() -> None:
    """A review (2026-12-07, skypilot#3017): a facts-only plan said nothing of the image's
    NCCL_GRAPH_FILE; now a warning names it (no verdict: no diagnosis)."""
    plan = decide(azure_host(), None)
    (found,) = [f for f in plan.findings if f.id == "nccl-tuning-knobs"]
    assert found.severity == "warning" and f"NCCL_GRAPH_FILE={GRAPH}" in found.message
    assert plan.strategy == "none"


def test_a_knob_in_the_environment_and_the_file_comes_out_of_the_file_too() -> None:
    """A re-read (2026-12-07): once the operator takes it out of the environment, as told,
    /etc/nccl.conf must not set it again; and ~/.nccl.conf counts as read before it."""
    f = azure_host()
    f["nccl"]["env"] = {"NCCL_GRAPH_FILE": GRAPH}
    (step,) = decide(f, FAILED).steps
    assert step.vars["gpufix_nccl_profile_drop"] == ["NCCL_GRAPH_FILE"]
    f = azure_host()
    f["nccl"]["files"]["/root/.nccl.conf"] = {"NCCL_GRAPH_FILE": GRAPH}
    plan = decide(f, FAILED)
    assert plan.steps[0].vars["gpufix_nccl_profile_drop"] == ["NCCL_GRAPH_FILE"]
    assert any("set in the environment or ~/.nccl.conf" in r for r in plan.risks)


def test_gpufix_s_own_profile_is_no_leftover_knob() -> None:
    f = azure_host()
    f["nccl"]["files"] = {"/etc/nccl.conf": {"NCCL_PROTO": "Simple"}}
    f["nccl"]["gpufix_written"] = ["/etc/nccl.conf"]
    assert "nccl-tuning-knobs" not in [x.id for x in decide(f, None).findings]
