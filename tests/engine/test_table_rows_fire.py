"""Every row of the decision table (knowledge/evidence_fixes.yaml) can fire with the shipped
knowledge base: for each row, a recorded host changed only as far as the row's `when`
conditions say, and a probe verdict that shows the row's evidence, decide that row
(plan.extra["decision"]["row"]).

A row no host and verdict can reach is dead knowledge (a condition no knowledge row backs, or a
row shadowed by an earlier one): this test fails for it. The base host is the recorded jammy
4x P100 (tests/fixtures/hosts/jammy-4xp100-torch28.json), with its GPUs made A100 SXM and ACS
unread (lspci without root), where no condition holds: GPUs with P2P, IOMMU off, a supported LTS driver (580), no NVSwitch,
not in a container, torch 2.8.0's NCCL outside every nccl_issues.yaml range; and a verdict that
stalls while the process group forms (pg_init, before the data phases) unless a row asks for
more.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from gpufix import versions
from gpufix.engine import decide as engine
from gpufix.engine.kb import load
from gpufix.engine.kb_evidence import EvidenceFix
from gpufix.engine.rules import load as load_rules

HOSTS = Path(__file__).parents[1] / "fixtures" / "hosts"
KB = load()
decide = partial(engine.decide, kb=KB, rules=load_rules())
BASE = "jammy-4xp100-torch28"
Facts = dict[str, Any]
Verdict = dict[str, Any]
# Rows that no shipped knowledge lets fire, each with what it lacks (reported to the lead; the
# test fails again, strictly, once the knowledge makes them reachable, so the mark comes off).
UNREACHABLE = {
    "p2p-off-driver-issue": (
        "no driver_issues.yaml row shows experiment:p2p-off (the one release-note row shows "
        "experiment:gpus and stall:collective)"
    ),
}


def base_facts() -> Facts:
    f = copy.deepcopy(json.loads((HOSTS / f"{BASE}.json").read_text())["facts"])
    # torch 2.8.0+cu128 has no Pascal kernels (torch_builds.yaml), which would decide before the
    # table; A100 SXM boards on the same PCIe tree keep everything else as recorded.
    _gpus(f, "NVIDIA A100-SXM4-80GB", "8.0")
    f["pcie"]["bridges"] = {"unknown": "lspci: ACS capabilities need root"}
    f["containers"]["kubelet"] = False  # module 1.6.0 reads it: not a Kubernetes node
    return f


def _verdict(kind: str = "hung", phase: str = "pg_init", **more: Any) -> Verdict:
    v: Verdict = {"format": "gpufix-probe", "version": 1, "verdict": kind, "causes": []}
    v["stalled" if kind == "hung" else "failed_in"] = {"phase": phase, "ranks": [0, 1]}
    return v | more


def _experiment(exp_id: str, result: str) -> dict[str, Any]:
    return {"id": exp_id, "env": {}, "gpus": None, "verdict": result, "stalled": None,
            "error": None, "elapsed_s": 1.0}  # fmt: skip


# --- evidence: the verdict (and, for NCCL settings, the facts) that shows each key -------------

EXPERIMENT_IDS = {"ifname": "ifname-eth0", "gpus": "gpus-0-1"}
OVERRIDES = {"ifname-filter": {"NCCL_SOCKET_IFNAME": "^docker0"}, "tuning": {"NCCL_BUFFSIZE": "4"},
             "ifname-absent": {"NCCL_SOCKET_IFNAME": "ib9"}}  # fmt: skip


def show(evidence: str, f: Facts) -> Verdict:
    kind, _, what = evidence.partition(":")
    if kind == "experiment" and what == "gpus":
        # As the probe writes it: a pair's runs fail and `suspects` names the GPU (a healthy
        # pair decides nothing by itself, so the probe never puts one in `decided_by`).
        pair = _experiment(EXPERIMENT_IDS["gpus"], "hung")
        return _verdict(experiments=[pair], suspects={"gpus": [1], "links": []})
    if kind == "experiment":
        exp_id = EXPERIMENT_IDS.get(what, what)
        return _verdict(experiments=[_experiment(exp_id, "healthy")], decided_by=exp_id)
    if kind == "layer":
        return _verdict(scope="multi-node", failed_layer=what, hosts=["a", "b"], failed_hosts=["b"])
    if kind == "signature":
        sig = next(s for s in KB.error_signatures if s.id == what)
        return _verdict("failed", "pg_init", error=sig.match[0])
    if kind == "override":
        f["nccl"] = {"env": dict(OVERRIDES[what]), "files": {}}
        return _verdict()
    if kind == "soak":
        return _verdict(
            soak={"sizes": [1024], "iters": 5, "verdict": "hung", "stalled_at_bytes": 65536}
        )
    if evidence == "experiments:none-decided":
        return _verdict(experiments=[_experiment("p2p-off", "hung")], decided_by=None)
    if evidence == "stall:gloo":
        return _verdict(phase="allreduce", backend="gloo")
    phases = {
        "stall:collective": "pg_init",
        "stall:init": "cuda_init",
        "stall:import": "import_torch",
    }
    return _verdict(phase=phases[evidence])


# --- conditions: the smallest change to the base host that makes each one true ------------------


def _driver(f: Facts, version: str) -> None:
    f["driver"].update(kernel_module=version, userspace=version)
    f["driver"]["userspace_sources"] = {k: version for k in f["driver"]["userspace_sources"]}


def _gpus(f: Facts, name: str, cc: str) -> None:
    for gpu in f["gpus"]:
        gpu.update(name=name, compute_capability=cc)


def _no_p2p(f: Facts, v: Verdict, row: EvidenceFix) -> None:
    """GeForce RTX 4090s as the recorded focal host reads them: nvidia-smi topo -p2p r says CNS
    (chipset not supported) for every pair (tests/fixtures/tool_outputs/p2p_r_4x4090.txt)."""
    _gpus(f, "NVIDIA GeForce RTX 4090", "8.9")
    names = [f"GPU{i}" for i in range(len(f["gpus"]))]
    f["p2p"] = {"read": {a: {b: "CNS" for b in names if b != a} for a in names}}


def _p2p_offered(f: Facts, v: Verdict, row: EvidenceFix) -> None:
    """The driver's P2P reading not refused: here not read at all."""
    f["p2p"] = {"unknown": "not read"}


def _p2p_refused(f: Facts, v: Verdict, row: EvidenceFix) -> None:
    """The driver refuses P2P between every pair (CNS), whatever the GPU model."""
    names = [f"GPU{i}" for i in range(len(f["gpus"]))]
    f["p2p"] = {"read": {a: {b: "CNS" for b in names if b != a} for a in names}}


def _p2p_off_held(f: Facts, v: Verdict, row: EvidenceFix) -> None:
    """The failing run already had P2P off: an administrator's /etc/nccl.conf set it (the
    driver's P2P reading not read, so the refusal row does not come first)."""
    f["p2p"] = {"unknown": "not read"}
    f["nccl"]["files"] = {"/etc/nccl.conf": {"NCCL_P2P_DISABLE": "1"}}


def _rank_elsewhere(f: Facts, v: Verdict, row: EvidenceFix) -> None:
    """Rank 0 never reached the collective that rank 1 had called and waited in."""
    v["stalled"], v["failed_in"] = {"phase": "barrier", "ranks": [0], "waiting": [1]}, None


def _iommu_translated(f: Facts, v: Verdict, row: EvidenceFix) -> None:
    f["iommu"].update(groups=64, units=2, mode="translated")


def _acs_iommu_off(f: Facts, v: Verdict, row: EvidenceFix) -> None:
    f["pcie"]["bridges"] = []
    f["iommu"]["mode"] = "off"


def _driver_issue(f: Facts, v: Verdict, row: EvidenceFix) -> None:
    """A driver_issues.yaml row whose evidence is this row's, on the platform it names."""
    issue = next(i for i in KB.driver_issues if row.evidence in i.shows)
    low = issue.affected.split(",")[0].lstrip(">=")
    _driver(f, next(d for d in ("535.154.05", f"{low}.0") if issue.matches(d)))
    if issue.archs == ("Hopper",):
        _gpus(f, "NVIDIA H100 80GB HBM3", "9.0")
    if issue.nvswitch:
        _nvswitch(f, v, row)


def _eol_driver(f: Facts, v: Verdict, row: EvidenceFix) -> None:
    _driver(f, "470.256.02")  # driver_branches.yaml: R470 support ended 2024-07


def _new_feature_driver(f: Facts, v: Verdict, row: EvidenceFix) -> None:
    _driver(f, "545.29.06")  # driver_branches.yaml: R545 is a new-feature branch


def _driver_before_cuda_11_3(f: Facts, v: Verdict, row: EvidenceFix) -> None:
    _driver(f, "460.91.03")  # cuda_toolkits.yaml: 11.3 needs 465.19.01


def _driver_mismatch_read(f: Facts, v: Verdict, row: EvidenceFix) -> None:
    f["driver"]["mismatch"] = True  # module and libraries differ until a reboot


def _nvswitch(f: Facts, v: Verdict, row: EvidenceFix) -> None:
    m = {f"GPU{i}": {f"GPU{j}": "NV18" for j in range(len(f["gpus"])) if j != i}
         for i in range(len(f["gpus"]))}  # fmt: skip
    f["topology"]["matrix"] = m
    f["fabricmanager"].update(installed=f["driver"]["userspace"], running=True)


def _fabricmanager_stopped(f: Facts, v: Verdict, row: EvidenceFix) -> None:
    _nvswitch(f, v, row)
    f["fabricmanager"]["running"] = False


def _in_container(f: Facts, v: Verdict, row: EvidenceFix) -> None:
    f["containers"]["in_container"] = True
    f["containers"]["ipc_host"] = True  # --ipc=host: /dev/shm is the host's, not Docker's 64 MB


def _container_shm_default(f: Facts, v: Verdict, row: EvidenceFix) -> None:
    f["containers"].update(in_container=True, ipc_host=False)
    f["shm"]["size_bytes"] = 64 * 1024 * 1024


def _docker_host_shm_fine(f: Facts, v: Verdict, row: EvidenceFix) -> None:
    f["containers"].update(in_container=False, docker="24.0.7")
    f["shm"]["size_bytes"] = 32 * 1024**3


def _host_shm_fine_runtime_unread(f: Facts, v: Verdict, row: EvidenceFix) -> None:
    f["containers"].update(in_container=False, docker={"unknown": "not read"})
    f["gathered_in"] = {"where": "host", "evidence": None}
    f["shm"]["size_bytes"] = 32 * 1024**3


def _kube_node_shm_fine(f: Facts, v: Verdict, row: EvidenceFix) -> None:
    f["containers"].update(in_container=False, kubelet=True)
    f["gathered_in"] = {"where": "host", "evidence": None}
    f["shm"]["size_bytes"] = 32 * 1024**3


def _multi_node(f: Facts, v: Verdict, row: EvidenceFix) -> None:
    v.update(scope="multi-node", hosts=["a", "b"], failed_hosts=["b"])


def _single_host(f: Facts, v: Verdict, row: EvidenceFix) -> None:
    v.pop("scope", None)  # a host probe (the default scope)


def _past_bootstrap(f: Facts, v: Verdict, row: EvidenceFix) -> None:
    for key in ("stalled", "failed_in"):
        if key in v:
            v[key]["phase"] = "allreduce"


def _stack_unread_untried(f: Facts, v: Verdict, row: EvidenceFix) -> None:
    """The training environment not read (neither torch nor its NCCL) and no experiment run
    (the base verdict runs none)."""
    f["python_envs"] = {"unknown": "not read"}


def _nvlink_peers(f: Facts, v: Verdict, row: EvidenceFix) -> None:
    n = len(f["gpus"])  # NV2 between every pair: NVLink bridges, too few links for NVSwitch
    f["topology"]["matrix"] = {
        f"GPU{i}": {f"GPU{j}": "NV2" for j in range(n) if j != i} for i in range(n)
    }


def _nccl_affected(f: Facts, v: Verdict, row: EvidenceFix) -> None:
    """An NCCL inside an nccl_issues.yaml range whose problem shows this row's evidence: the
    nvidia-nccl wheel of a torch release that pinned one (torch_nccl.yaml)."""
    for issue in KB.nccl_issues:
        if row.evidence not in issue.shows or issue.archs:
            continue
        hit = [t for t in KB.torch_nccl if issue.matches(t.nccl)]
        if hit:
            if "infiniband" in issue.setup:  # the HCA the problem needs (as /sys/class lists it)
                f["network"]["infiniband"] = ["mlx5_0"]
            if "multi-node" in issue.setup:
                _multi_node(f, v, row)
            env = f["python_envs"][0]["packages"]
            env["nvidia-nccl-cu12"] = hit[0].nccl
            env["torch"] = hit[0].torch
            return
    pytest.fail(f"no nccl_issues.yaml row shows {row.evidence} for a NCCL a torch wheel bundles")


CONDITIONS: dict[str, Callable[[Facts, Verdict, EvidenceFix], None]] = {
    "gpus-without-p2p": _no_p2p,
    "p2p-offered": _p2p_offered,
    "p2p-refused": _p2p_refused,
    "p2p-off-held": _p2p_off_held,
    "rank-elsewhere": _rank_elsewhere,
    "acs-or-iommu-on": _iommu_translated,
    "acs-iommu-off": _acs_iommu_off,
    "driver-known-issue": _driver_issue,
    "driver-branch-unsupported": _eol_driver,
    "driver-new-feature-branch": _new_feature_driver,
    "driver-before-cuda-11.3": _driver_before_cuda_11_3,
    "driver-mismatch-read": _driver_mismatch_read,
    "nvswitch": _nvswitch,
    "fabricmanager-not-ok": _fabricmanager_stopped,
    "in-container": _in_container,
    "container-shm-default": _container_shm_default,
    "docker-host-shm-fine": _docker_host_shm_fine,
    "host-shm-fine-runtime-unread": _host_shm_fine_runtime_unread,
    "kube-node-shm-fine": _kube_node_shm_fine,
    "multi-node": _multi_node,
    "single-host": _single_host,
    "past-bootstrap": _past_bootstrap,
    "nvlink-peers": _nvlink_peers,
    "nccl-version-affected": _nccl_affected,
    "stack-unread-untried": _stack_unread_untried,
}


def _case(row: EvidenceFix) -> Any:
    marks = []
    if row.id in UNREACHABLE:
        marks.append(pytest.mark.xfail(strict=True, reason=UNREACHABLE[row.id]))
    return pytest.param(row, id=row.id, marks=marks)


def test_every_condition_a_row_names_has_a_builder() -> None:
    named = {c for row in KB.evidence_fixes for c in row.when}
    assert named <= set(CONDITIONS), sorted(named - set(CONDITIONS))


def test_the_base_host_meets_no_condition() -> None:
    """Against a base where a condition already held, a row could fire for the wrong reason."""
    f = base_facts()
    plan = decide(f, show("stall:collective", f))
    assert plan.extra["decision"]["row"] == "collective-unexplained"
    env = f["python_envs"][0]["packages"]
    assert versions.parse(env["torch"]) is not None


@pytest.mark.parametrize("row", [_case(r) for r in KB.evidence_fixes])
def test_the_row_fires(row: EvidenceFix) -> None:
    f = base_facts()
    v = show(row.evidence, f)
    for name in row.when:
        CONDITIONS[name](f, v, row)
    plan = decide(f, v)
    decision = plan.extra.get("decision") or {}
    assert decision.get("row") == row.id, (
        f"{row.id} did not fire: {decision.get('row')} decided instead; path: {plan.path}"
    )
    # and the plan acts on it: the decision path names the row, or an error finding that led
    # to the row's own fix first did
    assert row.id in " ".join(plan.path) or plan.strategy == row.fix, plan.path


def test_a_row_does_not_fire_without_its_conditions() -> None:
    """The builders matter: the same evidence on the base host reaches another row."""
    for row in KB.evidence_fixes:
        if not row.when:
            continue
        f = base_facts()
        plan = decide(f, show(row.evidence, f))
        assert (plan.extra.get("decision") or {}).get("row") != row.id, row.id
