"""Issue 12: the decision table (evidence x facts -> fix), interim + permanent plans, needs
instead of guesses, and NCCL settings read as evidence. Recorded hosts with probe verdicts in the
contract's form (experiments, decided_by, multi-node layer, error texts)."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
from datetime import date
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml
from gpufix.engine import decide as engine
from gpufix.engine import overrides, signals
from gpufix.engine.context import Constraints
from gpufix.engine.kb import DEFAULT_DIR, load
from gpufix.engine.plan import Plan
from gpufix.engine.rules import load as load_rules
from gpufix.facts.host import from_facts

HOSTS = Path(__file__).parent / "fixtures" / "hosts"
KB = load()
decide = partial(engine.decide, kb=KB, rules=load_rules())
UNREAD = {"unknown": "not read"}


def facts(name: str) -> dict[str, Any]:
    return copy.deepcopy(json.loads((HOSTS / f"{name}.json").read_text())["facts"])


def verdict(kind: str = "hung", phase: str = "allreduce", **more: Any) -> dict[str, Any]:
    v: dict[str, Any] = {"format": "gpufix-probe", "version": 1, "verdict": kind, "causes": []}
    v["stalled" if kind == "hung" else "failed_in"] = {"phase": phase, "ranks": [0, 1]}
    return v | more


def experiment(exp_id: str, result: str) -> dict[str, Any]:
    return {"id": exp_id, "env": {}, "gpus": None, "verdict": result, "stalled": None,
            "error": None, "elapsed_s": 1.0}  # fmt: skip


def decided(exp_id: str, *others: tuple[str, str]) -> dict[str, Any]:
    exps = [experiment(i, r) for i, r in others] + [experiment(exp_id, "healthy")]
    return verdict(experiments=exps, decided_by=exp_id)


def p2p_capable(f: dict[str, Any]) -> dict[str, Any]:
    names = [f"GPU{i}" for i in range(len(f["gpus"]))]
    for gpu in f["gpus"]:
        gpu["name"] = "NVIDIA RTX 6000 Ada Generation"
    f["p2p"] = {"read": {a: {b: "OK" for b in names if b != a} for a in names}}
    return f


def _v(text: str) -> tuple[int, ...]:
    """A release number as numbers: 2.12.0 > 2.3.0 (strings sort the other way)."""
    return tuple(int(p) for p in text.split(".")[:3])


def needs(plan: Plan) -> set[str]:
    return {n["id"] for n in plan.extra["needs"]}


def profiles(plan: Plan) -> list[str]:
    return list(plan.steps[0].vars["gpufix_nccl_profile_names"])


# --- reading the verdict ----------------------------------------------------------------------


def test_signals_from_the_contract_fields() -> None:
    v = decided("cumem-off", ("p2p-off", "hung"), ("shm-off", "hung"))
    s = signals.read(v, KB)
    assert s.decided_by == "cumem-off" and s.family == "cumem-off"
    assert set(s.evidence()) == {"experiment:cumem-off", "stall:collective"}


def test_the_legacy_rerun_means_the_p2p_off_experiment() -> None:
    s = signals.read(verdict(no_p2p_rerun={"verdict": "healthy"}), KB)
    assert "experiment:p2p-off" in s.evidence()


def test_skipped_experiments_are_evidence_of_nothing() -> None:
    # A knob left untried (budget) means "none helped" is not shown yet: the plan asks for
    # the experiments instead of moving the NCCL build on a partial run.
    exps = [experiment("p2p-off", "hung"), experiment("shm-off", "skipped")]
    s = signals.read(verdict(experiments=exps, decided_by=None), KB)
    assert "experiments:none-decided" not in s.evidence() and s.skipped == ("shm-off",)
    assert s.tried == ("p2p-off",)
    only_skipped = signals.read(verdict(experiments=[experiment("p2p-off", "skipped")]), KB)
    assert "experiments:none-decided" not in only_skipped.evidence()
    # skipped GPU pairs are not knobs
    pairs = [experiment("p2p-off", "hung"), experiment("gpus-0-1", "skipped")]
    s2 = signals.read(verdict(experiments=pairs, decided_by=None), KB)
    assert "experiments:none-decided" in s2.evidence()


def test_nccl_knob_experiments_of_a_gloo_run_are_no_evidence() -> None:
    # gloo (a --cpu run) reads no NCCL setting: a knob "deciding" there is a fault or chance
    exps = [experiment("p2p-off", "hung"), experiment("shm-off", "healthy")]
    s = signals.read(verdict(experiments=exps, decided_by="shm-off", backend="gloo"), KB)
    assert s.decided_by is None and s.tried == () and "experiments:none-decided" not in s.evidence()
    # interface experiments set GLOO_SOCKET_IFNAME too: they stay evidence
    ifx = [experiment("ifname-eth1", "healthy")]
    s2 = signals.read(verdict(experiments=ifx, decided_by="ifname-eth1", backend="gloo"), KB)
    assert s2.decided_by == "ifname-eth1"
    nccl = signals.read(verdict(experiments=exps, decided_by="shm-off", backend="nccl"), KB)
    assert nccl.decided_by == "shm-off"


def test_a_healthy_gpu_pair_decides_nothing_by_itself() -> None:
    # every pair healthy, no suspects: not "one GPU or link fails"
    exps = [experiment("gpus-0-1", "healthy"), experiment("gpus-2-3", "healthy")]
    s = signals.read(verdict(experiments=exps, decided_by=None), KB)
    assert s.decided_by is None and not any(e.startswith("experiment:") for e in s.evidence())


def test_error_texts_are_matched_as_text_and_info_lines_are_not_trouble() -> None:
    tail = ["NCCL INFO NET/IB : Using [0]mlx5_0:1/IB", "NCCL WARN Cuda failure 'invalid argument'"]
    s = signals.read(verdict("failed", "pg_init", error=None, nccl_log_tail=tail), KB)
    assert "ib-error" not in s.signatures
    # NCCL's "Cuda failure" is a CUDA call that failed, not NCCL's own invalid-usage error
    # (a review, 2026-12-07: OpenRLHF#616, vLLM#25937 read as a framework's NCCL misuse)
    assert s.signatures == ("cuda-call-failed",)
    for own in (
        "invalid argument (run with NCCL_DEBUG=WARN for details)",
        "NCCL error in: ProcessGroupNCCL.cpp:514, invalid argument, NCCL version 2.7.8",
    ):
        assert signals.read(verdict("failed", "pg_init", error=own), KB).signatures == (
            "nccl-invalid-usage",
        )
    for cuda in ("CUDA error: invalid argument", "CUDA driver error: invalid argument"):
        assert (
            "nccl-invalid-usage"
            not in signals.read(verdict("failed", "pg_init", error=cuda), KB).signatures
        )
    # A regular-expression-looking text is only ever a substring to look for.
    s2 = signals.read(verdict("failed", "pg_init", error="(.*)+$ ^docker0 $(reboot)"), KB)
    assert s2.signatures == ()


def test_a_log_joined_on_one_line_drops_only_its_info_parts() -> None:
    """A review (2026-12-07, vllm#2084): a verdict's error copied a log as one line, "NCCL INFO
    ...; NCCL WARN Bootstrap : no socket interface found; ...", and the INFO part hid it all."""
    joined = ("NCCL INFO NCCL_SOCKET_IFNAME set by environment to ^lo,docker,veth; bootstrap.cc:45 "
              "NCCL WARN Bootstrap : no socket interface found")  # fmt: skip
    for sep in ("; ", " | "):
        text = joined.replace("; ", sep)
        s = signals.read(verdict("failed", "pg_init", error=text), KB)
        assert "no-socket-interface" in s.signatures, sep
    # a slash inside a message is no line joint (compat-driver-mismatch's own text has one)
    mismatch = "Error 803: system has unsupported display driver / cuda driver combination"
    assert (
        "compat-driver-mismatch"
        in signals.read(verdict("failed", "cuda_init", error=mismatch), KB).signatures
    )
    info_only = "NCCL INFO NET/IB : No device found; NCCL INFO Using network Socket"
    assert signals.read(verdict("failed", "pg_init", error=info_only), KB).signatures == ()


def test_multi_node_layer_and_soak() -> None:
    v = verdict(scope="multi-node", failed_layer="interface", hosts=["a", "b"], failed_hosts=["b"])
    v["soak"] = {"sizes": [1024], "iters": 5, "verdict": "hung", "stalled_at_bytes": 65536}
    s = signals.read(v, KB)
    assert {"layer:interface", "soak:stalled"} <= set(s.evidence())
    assert s.failed_hosts == ("b",) and s.soak_stalled_at == 65536


def test_ifname_filter_that_drops_ncc_defaults_is_corrected() -> None:
    f = facts("bionic-ga-2x3090")
    f["nccl"] = {
        "env": {"NCCL_BUFFSIZE": "16777216"},
        "files": {"/etc/nccl.conf": {"NCCL_SOCKET_IFNAME": "^docker0"}},
    }
    o = overrides.read(from_facts(f), KB)
    assert o.ifname_filter == "^docker0,docker,lo,virbr"
    assert o.tuning == ("NCCL_BUFFSIZE=16777216",)
    f["nccl"]["files"] = {"/etc/nccl.conf": {"NCCL_SOCKET_IFNAME": "^docker,lo,virbr"}}
    assert overrides.read(from_facts(f), KB).ifname_filter is None


# --- one knob decided ---------------------------------------------------------------------------


def test_p2p_off_on_gpus_without_p2p_is_the_fix_at_no_cost() -> None:
    plan = decide(facts("focal-4x4090"), decided("p2p-off"))
    assert plan.strategy == "nccl-profile" and profiles(plan) == ["no-p2p"]
    assert plan.interim is None and not any("bandwidth" in r for r in plan.risks)
    assert plan.extra["decision"]["row"] == "p2p-off-gpu-without-p2p"


def test_the_hosts_own_p2p_reading_wins_over_the_model_list() -> None:
    """NVIDIA: cudaDeviceCanAccessPeer (nvidia-smi topo -p2p r) is the final determinant. A 4090
    host whose pairs read OK (a P2P-enabled kernel module: tinygrad's open-gpu-kernel-modules
    patch, on 550.54.14 and later) is not 'GPUs without P2P'; unread, the model list decides. On a
    driver before 550.40.07 an OK reading is the known false report (tests/engine/
    test_p2p_ok_reading.py)."""
    f = facts("focal-4x4090")
    f["driver"].update(kernel_module="550.54.14", userspace="550.54.14")
    names = [f"GPU{i}" for i in range(len(f["gpus"]))]
    f["p2p"] = {"read": {a: {b: "OK" for b in names if b != a} for a in names}}
    assert decide(f, decided("p2p-off")).extra["decision"]["row"] != "p2p-off-gpu-without-p2p"
    f["p2p"] = UNREAD
    assert decide(f, decided("p2p-off")).extra["decision"]["row"] == "p2p-off-gpu-without-p2p"


def test_p2p_off_with_acs_known_is_pcie_acs_now_p2p_off() -> None:
    f = p2p_capable(facts("focal-4x4090"))
    f["driver"].update(kernel_module="580.95.05", userspace="580.95.05")
    plan = decide(f, decided("p2p-off"), Constraints(plan_date=KB.checked()))
    assert plan.strategy == "pcie-acs"
    assert plan.interim is not None and plan.interim.steps[0].vars["gpufix_nccl_profile_names"] == [
        "no-p2p"
    ]
    assert plan.to_dict()["interim"]["reboot_required"] is False


def test_an_interim_left_in_nccl_conf_is_a_risk_of_the_permanent_fix() -> None:
    """After `apply --interim`, /etc/nccl.conf holds P2P off; the ACS fix planned next says that
    setting stays through it and would make the probe after the fix prove nothing."""
    f = p2p_capable(facts("focal-4x4090"))
    f["driver"].update(kernel_module="580.95.05", userspace="580.95.05")
    f["nccl"]["files"]["/etc/nccl.conf"] = {"NCCL_P2P_DISABLE": "1"}
    plan = decide(f, decided("p2p-off"), Constraints(plan_date=KB.checked()))
    assert plan.strategy == "pcie-acs"
    (risk,) = [r for r in plan.risks if "still hold" in r]
    assert "NCCL_P2P_DISABLE=1" in risk and "no-p2p profile" in risk and "/etc/nccl.conf" in risk
    # the same setting as the plan's own fix is no leftover
    f["pcie"], f["iommu"] = UNREAD, UNREAD
    plan = decide(f, decided("p2p-off"))
    assert plan.strategy == "nccl-profile" and not [r for r in plan.risks if "still hold" in r]


def test_p2p_off_with_acs_unread_keeps_p2p_off_and_names_the_facts() -> None:
    f = p2p_capable(facts("focal-4x4090"))
    f["driver"].update(kernel_module="580.95.05", userspace="580.95.05")
    f["pcie"], f["iommu"] = UNREAD, UNREAD
    plan = decide(f, decided("p2p-off"))
    assert plan.strategy == "nccl-profile" and profiles(plan) == ["no-p2p"]
    assert {"acs", "iommu"} <= needs(plan) and plan.extra["complete"] is True
    assert any("bandwidth" in r for r in plan.risks)  # a workaround on P2P-capable GPUs


ALL_KNOBS = ("p2p-off", "p2p-level-pxb", "shm-off", "cumem-off", "ib-off", "proto-simple",
             "algo-ring", "nvls-off")  # fmt: skip


def test_a_change_the_probe_tried_in_vain_is_not_prescribed() -> None:
    """ACS and a translating IOMMU above P2P-capable GPUs, and a collective stall: with no
    experiment the ACS row decides; once P2P off was tried and still hung, the ACS fix (which
    rests on P2P) and P2P off are out, and every knob failing moves the NCCL build instead."""
    f = p2p_capable(facts("focal-4x4090"))
    f["driver"].update(kernel_module="580.95.05", userspace="580.95.05")
    c = Constraints(plan_date=KB.checked())
    before = decide(f, verdict(), c)
    assert before.extra["decision"]["row"] == "collective-acs-iommu"
    assert before.strategy == "pcie-acs"
    tried = verdict(experiments=[experiment(k, "hung") for k in ALL_KNOBS], decided_by=None)
    plan = decide(f, tried, c)
    assert plan.extra["decision"]["row"].startswith("experiments-none-decided")
    assert plan.strategy != "pcie-acs" and not plan.reboot_required
    assert plan.interim is None or "no-p2p" not in plan.interim.steps[0].vars.get(
        "gpufix_nccl_profile_names", []
    )


def test_a_soak_stall_whose_protocol_experiment_hung_is_not_the_protocol_profile() -> None:
    f = p2p_capable(facts("focal-4x4090"))
    v = verdict("healthy", experiments=[], decided_by=None)
    v.pop("stalled", None)
    v["soak"] = {"sizes": [1024, 65536], "iters": 5, "verdict": "hung", "stalled_at_bytes": 65536}
    assert decide(f, v).extra["decision"]["row"] == "soak-stalled"
    plan = decide(f, v)
    # NCCL_PROTO is a debugging setting: never written on a soak stall alone (expert review,
    # 2026-12-06); the proto-simple experiment decides
    assert plan.strategy == "none" and "experiments" in [n["id"] for n in plan.extra["needs"]]
    v["experiments"] = [experiment("proto-simple", "hung")]
    plan = decide(f, v)
    assert not any("proto-simple" in str(s.vars) for s in plan.steps)


def test_p2p_off_with_a_driver_in_a_release_note_range_pins_a_fixed_branch(
    tmp_path: Path,
) -> None:
    """The p2p-off-driver-issue row: a driver inside a driver_issues range moves to a branch
    outside it, with no-P2P as the interim. The shipped row holds only on NVSwitch H100
    (tests/engine/test_driver_issues.py), so this uses a row of the documented shape with no
    platform condition in a copy of the knowledge base."""
    d = tmp_path / "knowledge"
    shutil.copytree(DEFAULT_DIR, d)
    row = {"id": "p2p-range", "affected": ">=545,<545.29.06", "fixed_in": "545.29.06",
           "symptom": "P2P transfers hang", "shows": ["experiment:p2p-off"], "fix": "upgrade",
           "good_branches": [580], "source": "the release note's section"}  # fmt: skip
    (d / "driver_issues.yaml").write_text(yaml.safe_dump([row]))
    kb = load(d)
    f = p2p_capable(facts("jammy-470-torch23"))  # IOMMU off, no ACS redirect
    f["driver"].update(kernel_module="545.23.08", userspace="545.23.08")
    plan = engine.decide(f, decided("p2p-off"), Constraints(plan_date=KB.checked()), kb=kb,
                         rules=load_rules())  # fmt: skip
    assert plan.strategy == "driver-pin"
    assert plan.extra["decision"]["row"] == "p2p-off-driver-issue"
    branch = plan.steps[0].vars["gpufix_driver_branch"]
    assert branch == "580" and kb.driver_issues[0].matches(f"{branch}.95.05") is False
    assert "driver-known-issue" in {x.id for x in plan.findings}
    assert plan.interim is not None
    assert plan.interim.steps[0].vars["gpufix_nccl_profile_names"] == ["no-p2p"]
    # The same host outside the range: the row does not fire.
    f["driver"].update(kernel_module="580.95.05", userspace="580.95.05")
    other = engine.decide(f, decided("p2p-off"), Constraints(plan_date=KB.checked()), kb=kb,
                          rules=load_rules())  # fmt: skip
    assert other.extra["decision"]["row"] != "p2p-off-driver-issue"


def test_no_reboot_falls_back_to_the_interim_profile() -> None:
    f = p2p_capable(facts("bionic-ga-2x3090"))  # IOMMU translating: iommu=pt needs a reboot
    plan = decide(f, decided("p2p-off"), Constraints(reboot_allowed=False))
    assert plan.strategy == "nccl-profile" and profiles(plan) == ["no-p2p"]
    assert not plan.reboot_required


def test_when_the_rows_fix_is_blocked_its_interim_comes_next() -> None:
    """What the evidence says works now (the row's interim) ranks before what the evidence did
    not call for: a kernel below accelerate's threshold is a risk factor, not this diagnosis.
    Before, bionic's kernel-upgrade ranked second and would have been chosen had pcie-acs been
    infeasible; since 2026-12-03 a diagnosed hang does not rank it at all (the next test)."""
    for exp_id in ("p2p-off", "p2p-level-pxb"):
        plan = decide(facts("bionic-ga-2x3090"), decided(exp_id))
        ranked = [o.strategy for o in sorted(plan.options, key=lambda o: o.rank) if o.rank < 99]
        assert ranked == ["pcie-acs", "nccl-profile"], exp_id
    plan = decide(facts("container-shm64m"), decided("shm-off"))
    ranked = [o.strategy for o in sorted(plan.options, key=lambda o: o.rank) if o.rank < 99]
    assert ranked[:2] == ["container-fix", "nccl-profile"]


def test_a_diagnosis_whose_fix_cannot_apply_falls_to_none_not_to_a_risk_factor() -> None:
    """The multi-node probe names the container network, but the facts say training does not
    run in containers: container-fix is infeasible. Before 2026-12-03 the plan went on to
    bionic's kernel-upgrade (a reboot the evidence did not call for, to a 5.4 kernel that is
    still below accelerate's 5.5), and without it to the field notes' stack pin."""
    v = {"format": "gpufix-probe", "version": 1, "verdict": "failed", "backend": "nccl",
         "world_size": 4, "failed_in": {"phase": "pg_init", "ranks": [2, 3]},
         "scope": "multi-node", "failed_layer": "container-network", "hosts": ["a", "b"],
         "failed_hosts": ["b"]}  # fmt: skip
    plan = decide(facts("bionic-ga-2x3090"), v)
    assert plan.extra["decision"]["row"] == "layer-container-network"
    assert plan.strategy == "none" and not plan.reboot_required
    ranked = [o.strategy for o in sorted(plan.options, key=lambda o: o.rank) if o.rank < 99]
    assert ranked == ["container-fix", "nccl-profile"]  # no profile matches: not feasible
    assert any("container-fix not feasible" in line for line in plan.path)


def test_a_stack_diagnosis_keeps_the_pinned_image_and_drops_the_kernel() -> None:
    """No NCCL setting helps (every knob experiment ran and hung): the row moves the stack up.
    A pinned image carries the same move where the host cannot take it, so it stays ranked;
    bionic's kernel-upgrade, which nothing in the evidence calls for, does not."""
    knobs = ("p2p-off", "shm-off", "cumem-off", "proto-simple", "algo-ring", "p2p-level-pxb",
             "ib-off", "nvls-off", "gdr-off")  # fmt: skip
    plan = decide(
        facts("bionic-ga-2x3090"), verdict(experiments=[experiment(k, "hung") for k in knobs])
    )
    assert plan.extra["decision"]["row"] == "experiments-none-decided"
    ranked = [o.strategy for o in sorted(plan.options, key=lambda o: o.rank) if o.rank < 99]
    assert ranked == ["cuda-downgrade", "nccl-profile", "container-fallback"]


@pytest.mark.parametrize(
    ("exp_id", "profile"),
    [("cumem-off", "cumem-off"), ("nvls-off", "nvls-off"), ("proto-simple", "proto-simple"),
     ("algo-ring", "algo-ring"), ("ib-off", "ib-off"), ("mnnvl-off", "mnnvl-off")],
)  # fmt: skip
def test_each_knob_maps_to_its_profile(exp_id: str, profile: str) -> None:
    f = facts("jammy-470-torch23")
    f["driver"].update(kernel_module="580.95.05", userspace="580.95.05")
    plan = decide(f, decided(exp_id))
    assert plan.strategy == "nccl-profile" and profile in profiles(plan), plan.path


def test_multi_node_nvlink_off_that_decides_writes_its_profile_not_a_stack_move() -> None:
    """A multi-node init crash that NVLS off and cuMem off left failing and NCCL_MNNVL_ENABLE=0
    made healthy (NVIDIA/nccl#2186's runs on GB200 NVL72): the mnnvl-off profile. Without that
    experiment the same failures end at the row for knobs that all failed."""
    f = facts("jammy-470-torch23")
    f["driver"].update(kernel_module="580.95.05", userspace="580.95.05")
    tried = [experiment("nvls-off", "failed"), experiment("cumem-off", "failed")]
    where = {"scope": "multi-node", "hosts": ["a", "b"], "failed_layer": "collective"}
    v = verdict("failed", "pg_init", experiments=[*tried, experiment("mnnvl-off", "healthy")],
                decided_by="mnnvl-off", **where)  # fmt: skip
    plan = decide(f, v)
    assert plan.extra["decision"]["row"] == "mnnvl-off", plan.path
    assert plan.strategy == "nccl-profile" and profiles(plan) == ["mnnvl-off"]
    assert any("NCCL_MNNVL_ENABLE=0 (experiment mnnvl-off)" in line for line in plan.path)
    without = decide(f, verdict("failed", "pg_init", experiments=tried, decided_by=None, **where))
    assert without.extra["decision"]["row"] != "mnnvl-off"
    assert "mnnvl-off" not in (profiles(without) if without.strategy == "nccl-profile" else [])
    hung = [*tried, experiment("mnnvl-off", "failed")]
    vain = decide(f, verdict("failed", "pg_init", experiments=hung, decided_by=None, **where))
    assert vain.extra["decision"]["row"] != "mnnvl-off"  # tried and still failing: not prescribed


def test_ifname_experiment_names_the_interface() -> None:
    plan = decide(facts("bionic-ga-2x3090"), decided("ifname-lo"))
    assert profiles(plan) == ["socket-ifname"]
    assert plan.steps[0].vars["gpufix_nccl_profile_socket_ifname"] == "lo"


# --- no knob decided: NCCL versions move ------------------------------------------------------


def test_no_knob_helps_and_this_nccl_has_a_fixed_hang_moves_the_stack_up() -> None:
    f = facts("jammy-470-torch23")  # torch 2.3.0: NCCL 2.20.5, before 2.21.5's crossNic fix
    f["driver"].update(kernel_module="580.95.05", userspace="580.95.05")
    exps = [experiment("p2p-off", "hung"), experiment("cumem-off", "hung")]
    plan = decide(f, verdict(experiments=exps, decided_by=None))
    assert plan.strategy == "cuda-downgrade"
    assert plan.extra["stack_direction"] == "up"
    issue = plan.extra["decision"]["nccl_issue"]
    target = plan.extra["stack"]
    assert target["nccl"] is None or _v(target["nccl"]) >= _v(issue["fixed_in"])
    assert _v(plan.steps[0].vars["gpufix_ml_stack_torch_version"]) > _v("2.3.0")
    # the oldest release that fits and carries the fix is named beside the newest: fewer
    # changes to the training code (2026-12-06)
    low = target["smallest_fix"]
    assert _v("2.3.0") < _v(low["torch"]) < _v(target["torch"])
    carried = KB.torch_nccl_version(low["torch"])  # its own row, else its minor's newest
    assert carried is not None and _v(carried.nccl) >= _v(issue["fixed_in"])
    older = [r for r in KB.torch_releases if _v("2.3.0") < _v(r.version) < _v(low["torch"])]
    for r in older:  # none of them carries it
        row = KB.torch_nccl_version(r.version)
        assert row is None or _v(row.nccl) < _v(issue["fixed_in"]), r.version
    why = next(o for o in plan.to_dict()["options"] if o["strategy"] == "cuda-downgrade")["reason"]
    shown = f", NCCL {low['nccl']}," if low["nccl"] else ""  # only a release's own row is shown
    assert f"torch {low['torch']}+{low['tag']}{shown} is the smallest move" in why


def test_the_users_torch_release_is_installed_only_where_it_carries_the_fix() -> None:
    """--torch (2026-12-06): the smallest move the plan names can be chosen; a release whose
    NCCL predates the fix the evidence asks for is refused, as one that does not fit."""
    f = facts("jammy-470-torch23")
    f["driver"].update(kernel_module="580.95.05", userspace="580.95.05")
    exps = [experiment("p2p-off", "hung"), experiment("cumem-off", "hung")]
    v = verdict(experiments=exps, decided_by=None)
    low = decide(f, v).extra["stack"]["smallest_fix"]
    plan = decide(f, v, Constraints(torch=low["torch"]))
    assert plan.strategy == "cuda-downgrade"
    assert plan.steps[0].vars["gpufix_ml_stack_torch_version"] == low["torch"]
    assert plan.extra["stack"]["smallest_fix"] is None  # it is the smallest
    option = next(o for o in plan.to_dict()["options"] if o["strategy"] == "cuda-downgrade")
    assert "the release --torch names" in option["reason"]
    before = decide(f, v, Constraints(torch="2.5.1"))  # NCCL 2.21.5: before the fix
    option = next(o for o in before.to_dict()["options"] if o["strategy"] == "cuda-downgrade")
    assert not option["feasible"] and "or its NCCL is older than" in option["reason"]
    assert before.strategy != "cuda-downgrade"


def test_stack_moves_down_when_the_evidence_asks() -> None:
    f = facts("jammy-470-torch23")
    f["driver"] = UNREAD
    plan = decide(
        f,
        verdict(
            "failed",
            "cuda_init",
            error="CUDA driver version is insufficient for CUDA runtime version",
        ),
    )
    assert plan.strategy == "cuda-downgrade"
    assert plan.extra["stack_direction"] == "down"
    assert "driver" in needs(plan)


# --- unknown is not evidence --------------------------------------------------------------------


def test_a_hang_nothing_explains_never_hides_gpus() -> None:
    f = facts("jammy-470-torch23")
    f["driver"].update(kernel_module="580.95.05", userspace="580.95.05")
    plan = decide(f, verdict())
    assert plan.strategy != "single-gpu"
    assert "experiments" in needs(plan)
    allowed = decide(f, verdict(), Constraints(multi_gpu_required=False))
    assert allowed.strategy == "single-gpu"


def _nothing_known(f: dict[str, Any]) -> dict[str, Any]:
    """A PCIe host whose ACS, IOMMU and NVLink state nobody read: the public report's view."""
    f["driver"].update(kernel_module="580.95.05", userspace="580.95.05")
    f["pcie"], f["iommu"], f["topology"] = UNREAD, UNREAD, UNREAD
    return f


def test_a_single_hosts_data_phase_hang_nothing_explains_turns_p2p_off_and_asks() -> None:
    plan = decide(_nothing_known(facts("jammy-470-torch23")), verdict(phase="allreduce"))
    assert plan.extra["decision"]["row"] == "collective-unexplained-host"
    assert plan.strategy == "nccl-profile" and profiles(plan) == ["no-p2p"]
    assert {"experiments", "acs", "iommu"} <= needs(plan)
    assert not plan.reboot_required


def test_a_bootstrap_hang_is_not_blamed_on_p2p() -> None:
    plan = decide(_nothing_known(facts("jammy-470-torch23")), verdict(phase="pg_init"))
    assert plan.extra["decision"]["row"] == "collective-unexplained"
    assert plan.strategy == "cuda-downgrade"


def test_gpus_that_all_talk_over_nvlink_keep_p2p_and_move_nccl() -> None:
    f = facts("bionic-hwe-8xa100")  # every pair NV12
    f["driver"].update(kernel_module="580.95.05", userspace="580.95.05")
    f["pcie"], f["iommu"] = UNREAD, UNREAD
    plan = decide(f, verdict(phase="allreduce"))
    assert plan.extra["decision"]["row"] == "collective-unexplained-nvlink"
    assert plan.strategy != "nccl-profile"


def test_a_multi_node_data_phase_hang_is_not_a_local_p2p_question() -> None:
    v = verdict(phase="allreduce", scope="multi-node", hosts=["a", "b"], failed_layer=None,
                failed_hosts=[])  # fmt: skip
    plan = decide(_nothing_known(facts("jammy-470-torch23")), v)
    assert plan.extra["decision"]["row"] == "collective-unexplained"


def test_fabric_manager_error_with_the_driver_unread_is_an_incomplete_driver_pin() -> None:
    f = facts("bionic-hwe-8xa100")  # 8x A100 SXM4 on NV12: NVSwitch
    f["driver"], f["fabricmanager"] = UNREAD, UNREAD
    plan = decide(
        f,
        verdict("failed", "cuda_init", error="cudaErrorSystemNotReady: system not yet initialized"),
    )
    assert plan.strategy == "driver-pin" and plan.reboot_required
    assert plan.extra["complete"] is False
    assert {"driver", "fabricmanager"} <= needs(plan)
    assert plan.steps[0].vars == {"gpufix_driver_fabricmanager": True}


def test_multi_node_interface_layer_without_interfaces_is_incomplete() -> None:
    f = facts("bionic-ga-2x3090")
    f["network"] = UNREAD
    v = verdict("hung", "pg_init", scope="multi-node", failed_layer="interface", hosts=["a", "b"])
    plan = decide(f, v)
    assert plan.strategy == "nccl-profile" and profiles(plan) == ["socket-ifname"]
    assert "gpufix_nccl_profile_socket_ifname" not in plan.steps[0].vars
    assert plan.extra["complete"] is False and "interfaces" in needs(plan)
    with_facts = decide(facts("bionic-ga-2x3090"), v)
    assert with_facts.steps[0].vars["gpufix_nccl_profile_socket_ifname"] == "enp5s0"


def test_an_interface_profile_on_a_docker_host_says_where_it_holds() -> None:
    """A review (2026-12-06): a host interface name means nothing on Docker's bridge network;
    gpufix-run leaves NCCL_SOCKET_IFNAME out there, and the plan says so."""
    v = verdict("hung", "pg_init", scope="multi-node", failed_layer="interface", hosts=["a", "b"])
    plan = decide(facts("focal-4x4090"), v)
    assert plan.strategy == "nccl-profile" and profiles(plan) == ["socket-ifname"]
    assert "on the host's network (--network host)" in plan.outcome, plan.outcome
    other = decide(facts("focal-4x4090"), decided("p2p-off"))
    assert other.strategy == "nccl-profile" and "--network host" not in other.outcome


@pytest.mark.parametrize(
    ("v", "row"),
    [
        (verdict("hung", "pg_init", scope="multi-node", failed_layer="rendezvous"), "layer-rendezvous"),
        (verdict("failed", "pg_init", error="Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1000"), "text-duplicate-gpu"),
        (verdict("failed", "import_torch", error="No module named 'torch'"), "import-stall"),
    ],
)  # fmt: skip
def test_evidence_that_no_host_change_fixes_is_none(v: dict[str, Any], row: str) -> None:
    plan = decide(facts("bionic-ga-2x3090"), v)
    assert plan.strategy == "none" and plan.extra["decision"]["row"] == row


def test_container_with_an_unsized_shm_gets_container_fix_and_shm_off_now() -> None:
    f = facts("container-shm64m")
    f["shm"] = UNREAD
    plan = decide(f, verdict("failed", "pg_init", error="NCCL error: unhandled system error"))
    assert plan.strategy == "container-fix"
    assert plan.interim is not None
    assert plan.interim.steps[0].vars["gpufix_nccl_profile_names"] == ["shm-off"]


IMAGE = "nvcr.io/nvidia/pytorch:24.05-py3@sha256:" + "a" * 64


def _private_network_host() -> dict[str, Any]:
    f = facts("container-shm64m")
    f["shm"] = {"path": "/dev/shm", "size_bytes": 16 << 30}  # /dev/shm is not the question
    return f


def test_container_network_alone_is_the_wrapper_with_host_networking_not_a_bigger_shm() -> None:
    """Docker has no daemon-wide network default: --network host comes only from the wrapper,
    which needs the image. Without one the plan names that change and waits (incomplete);
    it does not raise /dev/shm, which the evidence does not implicate."""
    v = verdict("failed", "pg_init", scope="multi-node", failed_layer="container-network")
    plan = decide(_private_network_host(), v)
    assert plan.strategy == "container-fix"
    (step,) = plan.steps
    assert step.vars == {"gpufix_container_runtime_multi_node": True}
    assert plan.extra["complete"] is False
    assert [n["id"] for n in plan.extra["needs"]] == ["image"]
    with_image = decide(_private_network_host(), v, constraints=Constraints(container_image=IMAGE))
    assert with_image.extra["complete"] is True
    assert with_image.steps[0].vars["gpufix_container_runtime_multi_node"] is True
    assert with_image.steps[0].vars["gpufix_container_runtime_image"] == IMAGE
    assert "gpufix_container_runtime_default_shm_size" not in with_image.steps[0].vars


def test_container_shm_and_network_without_an_image_applies_the_shm_part() -> None:
    f = facts("container-shm64m")
    v = verdict("failed", "pg_init", scope="multi-node", failed_layer="container-network")
    plan = decide(f, v)
    assert plan.strategy == "container-fix" and plan.extra["complete"] is True
    assert plan.steps[0].vars == {"gpufix_container_runtime_default_shm_size": "1g"}
    assert "--network host on the docker run line" in plan.outcome


def test_a_tuning_knob_left_in_place_goes_back_to_defaults() -> None:
    f = facts("jammy-470-torch23")
    f["driver"].update(kernel_module="580.95.05", userspace="580.95.05")
    f["nccl"] = {"env": {"NCCL_P2P_LEVEL": "NVL"}, "files": {}}
    plan = decide(f, verdict("hung", "pg_init"))
    assert plan.strategy == "nccl-profile" and profiles(plan) == ["default"]


# --- every decision names its source ------------------------------------------------------------


def test_every_table_row_cites_a_document_and_the_plan_carries_it() -> None:
    for row in KB.evidence_fixes:
        assert row.source.strip() and row.why.strip(), row.id
    plan = decide(facts("focal-4x4090"), decided("p2p-off"))
    assert plan.extra["decision"]["source"].startswith("NCCL environment variables")


# --- the plan model: interim beside the permanent fix -------------------------------------------


def test_interim_survives_the_plan_file(tmp_path: Path) -> None:
    from gpufix.engine.plan import load_plans, save_plans

    f = p2p_capable(facts("focal-4x4090"))
    f["driver"].update(kernel_module="580.95.05", userspace="580.95.05")
    plan = decide(f, decided("p2p-off"), Constraints(plan_date=KB.checked()), host_name="h")
    assert plan.interim is not None
    path = tmp_path / "plan.json"
    save_plans([plan], path)
    (back,) = load_plans(path)
    assert back.interim == plan.interim and back.to_dict() == plan.to_dict()
    doc = json.loads(path.read_text())
    assert set(doc["plans"][0]["interim"]) == {"strategy", "steps", "outcome", "reboot_required"}


def test_a_plan_file_with_a_rebooting_interim_is_refused(tmp_path: Path) -> None:
    from gpufix.engine.plan import load_plans, save_plans
    from gpufix.errors import InvalidInput

    plan = decide(p2p_capable(facts("focal-4x4090")), decided("p2p-off"), host_name="h")
    path = tmp_path / "plan.json"
    save_plans([plan], path)
    doc = json.loads(path.read_text())
    doc["plans"][0]["interim"] = {
        "strategy": "driver-pin",
        "steps": [],
        "outcome": "",
        "reboot_required": True,
    }
    path.write_text(json.dumps(doc))
    with pytest.raises(InvalidInput, match="interim"):
        load_plans(path)


def test_the_table_knows_the_contracts_strategy_names() -> None:
    from gpufix.engine.kb_evidence import STRATEGIES
    from gpufix.strategies import NAMES

    assert set(STRATEGIES) == set(NAMES)
    assert {r.fix for r in KB.evidence_fixes} <= set(NAMES)


def test_a_suspect_gpu_behind_acs_is_pcie_acs() -> None:
    f = p2p_capable(facts("focal-4x4090"))
    f["driver"].update(kernel_module="580.95.05", userspace="580.95.05")
    pairs = [experiment("gpus-0-1", "hung"), experiment("gpus-2-3", "healthy")]
    v = verdict(experiments=pairs, decided_by=None, suspects={"gpus": [0], "links": []})
    plan = decide(f, v, Constraints(plan_date=KB.checked()))
    assert plan.strategy == "pcie-acs" and plan.extra["decision"]["row"] == "gpu-pair-acs"


def _suspect_gpu_verdict() -> dict[str, Any]:
    pairs = [experiment("gpus-0-1", "hung"), experiment("gpus-2-3", "healthy")]
    return verdict(experiments=pairs, decided_by=None, suspects={"gpus": [0], "links": []})


def _a100_host_in_a_container(driver: str) -> dict[str, Any]:
    """Four A100s, ACS unread, IOMMU off, run from a container with Docker's 64 MB /dev/shm."""
    f = facts("jammy-4xp100-torch28")
    for gpu in f["gpus"]:
        gpu.update(name="NVIDIA A100-SXM4-80GB", compute_capability="8.0")
    f["pcie"]["bridges"] = {"unknown": "lspci: ACS capabilities need root"}
    f["driver"].update(kernel_module=driver, userspace=driver)
    shm = facts("container-shm64m")
    f.update(containers=shm["containers"], shm=shm["shm"], gathered_in=shm["gathered_in"])
    return f


def test_a_suspect_gpu_is_not_a_host_wide_question() -> None:
    """Other pairs on the same host (same container, same /dev/shm) work: the container-shm row,
    which would otherwise fire for a collective stall in a 64 MB container, cannot explain it.
    With no software cause in the facts the plan changes nothing and names the diagnostics."""
    plan = decide(_a100_host_in_a_container("580.95.05"), _suspect_gpu_verdict())
    assert plan.extra["decision"]["row"] == "gpu-pair-hardware"
    assert plan.strategy == "none" and not plan.steps
    assert "gpu-diagnostics" in [n["id"] for n in plan.extra["needs"]]
    no_subsets = decide(_a100_host_in_a_container("580.95.05"), verdict())
    assert no_subsets.strategy == "container-fix"


def test_a_suspect_gpu_on_a_branch_past_support_moves_to_a_supported_branch() -> None:
    f = _a100_host_in_a_container("570.172.08")
    plan = decide(f, _suspect_gpu_verdict(), Constraints(plan_date=date(2026, 12, 1)))
    assert plan.extra["decision"]["row"] == "gpu-pair-unsupported-driver"
    assert plan.strategy == "driver-pin"
    assert int(plan.steps[0].vars["gpufix_driver_branch"]) > 570


def test_a_healthy_probe_clears_the_host_and_names_what_is_left() -> None:
    """Nothing to change, yet a hang was reported: the plan says what would still find it (a
    soak, unless one ran; the training program through gpufix lint)."""
    plan = decide(facts("bionic-ga-2x3090"), verdict("healthy") | {"causes": []})
    assert plan.strategy == "none" and not plan.steps
    assert [n["id"] for n in plan.extra["needs"]] == ["soak", "workload"]
    soaked = verdict("healthy") | {"soak": {"sizes": [1024], "iters": 5, "verdict": "healthy"}}
    assert [n["id"] for n in decide(facts("bionic-ga-2x3090"), soaked).extra["needs"]] == [
        "workload"
    ]
    assert decide(facts("bionic-ga-2x3090"), decided("p2p-off")).strategy != "none"


def test_the_documented_decision_table_is_the_knowledge_base_s() -> None:
    """docs/decision.md shows the table the engine reads (regenerate with corpus_report.py)."""
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run(
        [sys.executable, str(root / "bench" / "corpus_report.py"), "--decision-table"],
        capture_output=True, text=True, check=True, timeout=120,
    ).stdout.strip()  # fmt: skip
    assert out.startswith("| row |") and out in (root / "docs" / "decision.md").read_text()


def test_a_probe_that_saw_no_gpu_is_no_verdict_on_a_gpu_host() -> None:
    """`not-applicable` from a probe run where the GPUs were hidden (a container without them)
    tested nothing: planned on, bionic's kernel warning became a kernel-upgrade reboot (review,
    2026-12-03). It is planned as no verdict, says so, and asks for the probe."""
    from gpufix.engine.kb import load as load_kb
    from gpufix.engine.rules import load as load_rules
    from gpufix.planning import plan_host

    na = {"format": "gpufix-probe", "version": 1, "verdict": "not-applicable", "causes": []}
    plan = plan_host(facts("bionic-ga-2x3090"), na, Constraints(), host="h1", python_envs=[],
                     kb=load_kb(), rules=load_rules())  # fmt: skip
    assert plan.strategy == "none" and not plan.reboot_required
    assert plan.probe_verdict == "not-applicable"
    assert any("the probe saw no NVIDIA GPU" in r for r in plan.risks)
    assert "probe" in [n["id"] for n in plan.extra["needs"]]


def test_gdr_off_clears_acs_on_the_nics_bridges_too() -> None:
    """GDR off made the multi-node run healthy: the NIC cannot reach GPU memory. The facts list
    the bridges above the GPUs only, so an explicit list would leave the adapter's own ports
    with ACS on; the unit's [auto] finds the adapters beside the GPUs at boot. GPU-to-GPU
    evidence keeps the explicit list."""
    f = p2p_capable(facts("focal-4x4090"))
    f["driver"].update(kernel_module="580.95.05", userspace="580.95.05")
    day = Constraints(plan_date=KB.checked())
    v = decided("gdr-off") | {"scope": "multi-node", "hosts": ["a", "b"]}
    plan = decide(f, v, day)
    assert plan.strategy == "pcie-acs", plan.path
    assert plan.steps[0].vars["gpufix_pcie_acs_bridges"] == ["auto"]
    assert "network adapters beside them" in plan.steps[0].description
    p2p = decide(f, decided("p2p-off"), day)
    assert p2p.strategy == "pcie-acs"
    bridges = p2p.steps[0].vars["gpufix_pcie_acs_bridges"]
    assert bridges != ["auto"] and all(b.startswith("0000:") for b in bridges)


def test_acs_unread_with_a_broken_peer_path_finds_the_bridges_at_boot() -> None:
    """lspci could not be read (no become) and the IOMMU is already in pass-through, while the
    probe shows the peer path broken: asked for by name, pcie-acs leaves the bridges to the
    unit, which finds those above the NVIDIA GPUs at boot ([auto]); not asked for, the plan
    turns P2P off and asks for the facts (ACS unread is not evidence)."""
    f = p2p_capable(facts("focal-4x4090"))
    f["driver"].update(kernel_module="580.95.05", userspace="580.95.05")
    f["pcie"]["bridges"] = {"unknown": "lspci needs root"}
    f["iommu"]["mode"], f["iommu"]["cmdline"]["iommu"] = "passthrough", "pt"
    v = verdict("hung", "p2p_copy", causes=[{"id": "p2p-path", "evidence": "x", "source": "y"}])
    asked = decide(f, v, Constraints(plan_date=KB.checked(), strategy="pcie-acs"))
    assert asked.steps[0].vars == {"gpufix_pcie_acs_bridges": ["auto"]}
    assert "every bridge above an NVIDIA GPU (found at boot)" in asked.steps[0].description
    assert decide(f, v, Constraints(plan_date=KB.checked())).strategy == "nccl-profile"


def test_nccl_built_for_an_old_cuda_refusing_graph_capture_moves_the_stack() -> None:
    """NCCL's own warning (src/misc/strongstream.cc) says its build (CUDA runtime < 11.3) or the
    driver (< R465) cannot take graph capture: the stack moves, P2P is not turned off."""
    warn = (
        "misc/strongstream.cc:53 NCCL WARN NCCL cannot be captured in a graph if either it "
        "wasn't built with CUDA runtime >= 11.3 or if the installed CUDA driver < R465."
    )
    s = signals.read(verdict("failed", "allreduce", error=warn), KB)
    assert "nccl-graph-capture" in s.signatures
    plan = decide(facts("bionic-ga-2x3090"), verdict("failed", "allreduce", error=warn))
    assert plan.strategy == "cuda-downgrade"
    assert plan.extra["decision"]["row"] == "text-graph-capture"


def test_graph_capture_refused_under_a_driver_before_r465_moves_the_driver() -> None:
    """Under a driver below Table 3's minimum for CUDA 11.3 (465.19.01) NCCL refuses capture
    whatever its build (strongstream.cc), so no torch move can fix it: the driver moves. An
    unread driver keeps the stack move and asks for the driver."""
    warn = "NCCL WARN NCCL cannot be captured in a graph if either it wasn't built with CUDA runtime >= 11.3"
    f = facts("bionic-ga-2x3090")
    f["driver"].update(kernel_module="460.91.03", userspace="460.91.03")
    plan = decide(f, verdict("failed", "allreduce", error=warn))
    assert plan.extra["decision"]["row"] == "text-graph-capture-old-driver", plan.path
    assert plan.strategy == "driver-pin"
    assert int(plan.steps[0].vars["gpufix_driver_branch"]) >= 465  # the branch it writes
    f["driver"].update(kernel_module="465.19.01", userspace="465.19.01")
    at_floor = decide(f, verdict("failed", "allreduce", error=warn))
    assert at_floor.extra["decision"]["row"] == "text-graph-capture"
    f["driver"] = UNREAD
    unread = decide(f, verdict("failed", "allreduce", error=warn))
    assert unread.extra["decision"]["row"] == "text-graph-capture"
    assert "driver" in [n["id"] for n in unread.extra["needs"]], unread.extra["needs"]


def test_graph_capture_under_an_old_driver_on_kepler_changes_nothing_and_says_why() -> None:
    """Kepler's last branch, R470, reaches R465 but left support: no supported driver can take
    capture on these GPUs, and a torch move cannot either, so the plan changes nothing and its
    path names R470 and the end of its support."""
    warn = "NCCL WARN NCCL cannot be captured in a graph if either it wasn't built with CUDA runtime >= 11.3"
    f = facts("bionic-ga-2x3090")
    for gpu in f["gpus"]:
        gpu["name"] = "Tesla K80"
    f["driver"].update(kernel_module="460.91.03", userspace="460.91.03")
    plan = decide(f, verdict("failed", "allreduce", error=warn))
    assert plan.extra["decision"]["row"] == "text-graph-capture-old-driver", plan.path
    assert plan.strategy == "none" and not plan.steps, plan.path
    assert any("R470, the newest that would, left support" in line for line in plan.path)


def test_nvlink_sharp_off_that_decides_a_multi_node_run_writes_its_profile() -> None:
    """The multi-node probe tries nvls-off on hosts with NVLink SHARP (probe/multinode.py): when
    it decides, the plan is the nvls-off profile, as for one host."""
    f = facts("jammy-470-torch23")
    f["driver"].update(kernel_module="580.95.05", userspace="580.95.05")
    where = {"scope": "multi-node", "hosts": ["a", "b"], "failed_layer": "collective"}
    v = verdict("hung", "allreduce", experiments=[experiment("nvls-off", "healthy")],
                decided_by="nvls-off", **where)  # fmt: skip
    plan = decide(f, v)
    assert plan.strategy == "nccl-profile" and profiles(plan) == ["nvls-off"], plan.path


def test_gpus_the_driver_refuses_p2p_on_are_not_told_to_turn_it_off() -> None:
    """From 2.19.1 NCCL turns P2P off wherever NVML reports it disabled (ncclTopoCheckP2p,
    src/graph/paths.cc). The recorded 4090 host reads CNS for every pair: with such an NCCL it
    already goes through shared memory, so NCCL_P2P_DISABLE=1 would change nothing. With the
    host's own NCCL 2.18.1, or unread, P2P off is the fix as before."""
    f = facts("focal-4x4090")
    f["driver"].update(kernel_module="580.95.05", userspace="580.95.05")
    f["python_envs"][0]["packages"]["nvidia-nccl-cu12"] = "2.21.5"  # follows NVML from 2.19.1
    plan = decide(f, verdict("hung", "allreduce"))
    assert plan.extra["decision"]["row"] == "collective-unexplained-no-p2p-path", plan.path
    assert "gpu-p2p-refused" in {x.id for x in plan.findings}
    assert "no-p2p" not in (profiles(plan) if plan.strategy == "nccl-profile" else [])
    f["python_envs"][0]["packages"]["nvidia-nccl-cu12"] = "2.18.6"
    older = decide(f, verdict("hung", "allreduce"))
    assert older.extra["decision"]["row"] == "collective-gpu-without-p2p"
    f["python_envs"][0]["packages"]["nvidia-nccl-cu12"] = "2.21.5"
    f["p2p"] = UNREAD
    unread = decide(f, verdict("hung", "allreduce"))
    assert unread.extra["decision"]["row"] == "collective-gpu-without-p2p"
    assert unread.strategy == "nccl-profile" and profiles(unread) == ["no-p2p"]
