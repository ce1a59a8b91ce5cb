"""A verdict probed with the job's own settings (`gpufix probe HOST --job-env VAR=VALUE`): healthy
without them decides `none` (the job changes, not the host), and a profile whose variable the job
sets itself says that /etc/nccl.conf does not reach it (NCCL reads its config files only for
variables not in the environment)."""

from __future__ import annotations

import copy
import json
from functools import partial
from pathlib import Path
from typing import Any

from gpufix.engine import decide as engine
from gpufix.engine import signals
from gpufix.engine.kb import load
from gpufix.engine.rules import load as load_rules

KB = load()
decide = partial(engine.decide, kb=KB, rules=load_rules())
HOSTS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"


def _facts(name: str) -> dict[str, Any]:
    facts: dict[str, Any] = json.loads((HOSTS / f"{name}.json").read_text())["facts"]
    return copy.deepcopy(facts)


def _verdict(decided: str, job_env: dict[str, str], **more: Any) -> dict[str, Any]:
    exp = {"id": decided, "env": {}, "gpus": None, "verdict": "healthy", "stalled": None,
           "error": None, "elapsed_s": 1.0}  # fmt: skip
    v = {"format": "gpufix-probe", "version": 1, "verdict": "hung", "causes": [],
         "stalled": {"phase": "pg_init", "ranks": [0, 1]}, "experiments": [exp],
         "decided_by": decided, "job_env": job_env}  # fmt: skip
    return v | more


def test_healthy_without_the_job_settings_changes_nothing_on_the_host() -> None:
    plan = decide(_facts("bionic-ga-2x3090"), _verdict("job-env-off", {"NCCL_ALGO": "Tree"}))
    assert plan.strategy == "none" and not plan.steps
    assert plan.extra["decision"]["row"] == "job-setting"
    assert plan.extra["decision"]["job_env"] == ["NCCL_ALGO=Tree"]
    assert any("without NCCL_ALGO=Tree (experiment job-env-off)" in p for p in plan.path)


def test_it_outranks_the_layer_of_a_multi_node_run() -> None:
    v = _verdict("job-env-off", {"NCCL_SOCKET_IFNAME": "=eth9"}, scope="multi-node",
                 failed_layer="bootstrap", hosts=["a", "b"], failed_hosts=["b"])  # fmt: skip
    plan = decide(_facts("bionic-ga-2x3090"), v)
    assert plan.extra["decision"]["row"] == "job-setting"


def test_a_gloo_run_keeps_it() -> None:
    """Not an NCCL-only experiment: the job's GLOO_* settings are what gloo reads."""
    v = _verdict("job-env-off", {"GLOO_SOCKET_IFNAME": "eth9"}, backend="gloo")
    assert signals.read(v, KB).family == "job-env-off"


def test_a_profile_the_job_overrides_says_so() -> None:
    f = _facts("focal-4x4090")  # no P2P on these GPUs: turning it off is the fix
    plan = decide(f, _verdict("p2p-off", {"NCCL_P2P_DISABLE": "0"}))
    assert plan.strategy == "nccl-profile"
    assert "the job sets NCCL_P2P_DISABLE itself" in plan.outcome
    quiet = decide(f, _verdict("p2p-off", {"NCCL_ALGO": "Ring"}))
    assert "itself" not in quiet.outcome


def test_the_h200_verdict_of_a_broken_job_setting_decides_it() -> None:
    """Recorded on a real H200 (bench/device/probe_job_env.sh, docs/probe.md): NCCL's bootstrap
    found no interface named by the job's NCCL_SOCKET_IFNAME; without it the run was healthy."""
    from gpufix.inputs import load_probe_verdict

    root = Path(__file__).resolve().parents[2]
    v = load_probe_verdict(root / "docs" / "device" / "h200-probe-job-env-broken.json")
    assert v["job_env"] == {"NCCL_SOCKET_IFNAME": "=gpufix-none0"}
    assert "no socket interface" in v["error"]
    # on a host with two GPUs; the H200's own readings (torch, NCCL, driver) are not this host's
    plan = decide(_facts("bionic-ga-2x3090"), {**v, "facts": {}})
    assert plan.strategy == "none" and plan.extra["decision"]["row"] == "job-setting"


def test_the_one_setting_that_breaks_it_is_named() -> None:
    job = {"NCCL_ALGO": "Tree", "NCCL_SOCKET_IFNAME": "=eth9"}
    plan = decide(
        _facts("bionic-ga-2x3090"),
        _verdict("job-env-off", job, job_env_culprit="NCCL_SOCKET_IFNAME"),
    )
    assert plan.strategy == "none"
    assert plan.extra["decision"]["job_env_culprit"] == "NCCL_SOCKET_IFNAME==eth9"
    assert any(
        "without NCCL_SOCKET_IFNAME==eth9 alone, of the job's NCCL_ALGO=Tree NCCL_SOCKET_IFNAME==eth9"
        " (experiments job-env-off, job-env-without-NCCL_SOCKET_IFNAME)" in p
        for p in plan.path
    ), plan.path


def test_a_culprit_that_is_not_a_job_setting_is_not_read() -> None:
    v = _verdict("job-env-off", {"NCCL_ALGO": "Tree"}, job_env_culprit="NCCL_PROTO")
    assert signals.read(v, KB).job_env_culprit is None
    plan = decide(_facts("bionic-ga-2x3090"), v)
    assert "job_env_culprit" not in plan.extra["decision"]


def test_a_listed_run_without_one_setting_decides_like_job_env_off() -> None:
    """`--experiments job-env-without-VAR` alone: healthy there is the job's setting too."""
    v = _verdict("job-env-without-NCCL_ALGO", {"NCCL_ALGO": "Tree", "NCCL_PROTO": "LL"},
                 job_env_culprit="NCCL_ALGO")  # fmt: skip
    assert signals.read(v, KB).family == "job-env-off"
    plan = decide(_facts("bionic-ga-2x3090"), v)
    assert plan.extra["decision"]["row"] == "job-setting"
    assert plan.extra["decision"]["job_env_culprit"] == "NCCL_ALGO=Tree"


def test_the_h200_verdict_names_the_one_broken_setting() -> None:
    """Recorded on a real H200 (bench/device/probe_job_env.sh, third case): the job had a wrong
    interface and a harmless algorithm; only the run without the interface was healthy."""
    from gpufix.inputs import load_probe_verdict

    root = Path(__file__).resolve().parents[2]
    v = load_probe_verdict(root / "docs" / "device" / "h200-probe-job-env-culprit.json")
    assert [(e["id"], e["verdict"]) for e in v["experiments"]] == [
        ("job-env-off", "healthy"),
        ("job-env-without-NCCL_ALGO", "failed"),
        ("job-env-without-NCCL_SOCKET_IFNAME", "healthy"),
    ]
    plan = decide(_facts("bionic-ga-2x3090"), {**v, "facts": {}})
    assert plan.strategy == "none"
    assert plan.extra["decision"]["job_env_culprit"] == "NCCL_SOCKET_IFNAME==gpufix-none0"


def test_a_culprit_is_read_only_from_the_runs_without_the_settings() -> None:
    job = {"NCCL_ALGO": "Tree", "NCCL_PROTO": "LL"}
    other = _verdict("proto-simple", job, job_env_culprit="NCCL_ALGO")
    assert signals.read(other, KB).job_env_culprit is None
    gloo = _verdict("job-env-off", job, job_env_culprit="NCCL_ALGO", backend="gloo")
    assert signals.read(gloo, KB).job_env_culprit is None  # gloo reads no NCCL setting


def test_a_hand_listed_run_is_named_as_such() -> None:
    v = _verdict("job-env-without-NCCL_ALGO", {"NCCL_ALGO": "Tree", "NCCL_PROTO": "LL"},
                 job_env_culprit="NCCL_ALGO")  # fmt: skip
    plan = decide(_facts("bionic-ga-2x3090"), v)
    assert any("(experiment job-env-without-NCCL_ALGO)" in p for p in plan.path), plan.path


def test_the_summary_names_only_a_culprit_among_the_job_settings() -> None:
    from gpufix.inputs import load_probe_verdict
    from gpufix.probe import summarize

    root = Path(__file__).resolve().parents[2]
    v = load_probe_verdict(root / "docs" / "device" / "h200-probe-job-env-culprit.json")
    assert summarize(v).endswith("→ likely the job's NCCL_SOCKET_IFNAME==gpufix-none0 (--job-env)")
    assert summarize({**v, "job_env_culprit": "NCCL_PROTO"}).endswith(
        "→ likely one of the job's own settings (--job-env)"
    )


def test_one_spelling_of_the_without_experiment() -> None:
    """The program names job-env-without-VAR; the multi-node probe takes its prefix from the
    program, the engine reads it from verdicts, and the verdict schema's id pattern admits it."""
    import re

    from gpufix.probe.local import load_program, schema

    program = load_program()
    assert program.WITHOUT == signals.JOB_ENV_WITHOUT
    pattern = schema()["$defs"]["experiment_id"]["pattern"]
    assert re.match(pattern, program.WITHOUT + "NCCL_ALGO")
