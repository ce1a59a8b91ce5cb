"""A gpufix-probe v1 verdict built from the evidence a corpus thread supports.

The probe's causes are not written by hand: they come from the probe program's own cause table
(`find_causes`) applied to that evidence. The fields the helpers' contract adds to the verdict
(experiments, soak, multi-node scope) are added only once the probe schema declares them and the
verdict still validates; until then they stay in the case file (README.md, "Verdicts").
"""

from __future__ import annotations

import json
import re
from functools import cache
from importlib import resources
from types import ModuleType
from typing import Any

from gpufix import schema_check

PHASES = (
    "import_torch",
    "cuda_init",
    "alloc",
    "p2p_matrix",
    "p2p_copy",
    "pg_init",
    "barrier",
    "allreduce",
    "destroy",
)
DEADLINE_S = 120.0
# The contract's experiment vocabulary, in the order the probe runs them (cheapest first).
EXPERIMENT_ENV = {
    "p2p-off": {"NCCL_P2P_DISABLE": "1"},
    "p2p-level-pxb": {"NCCL_P2P_LEVEL": "PXB"},
    "shm-off": {"NCCL_SHM_DISABLE": "1"},
    "cumem-off": {"NCCL_CUMEM_ENABLE": "0"},
    "ib-off": {"NCCL_IB_DISABLE": "1"},
    "proto-simple": {"NCCL_PROTO": "Simple"},
    "algo-ring": {"NCCL_ALGO": "Ring"},
    "nvls-off": {"NCCL_NVLS_ENABLE": "0"},
    "mnnvl-off": {"NCCL_MNNVL_ENABLE": "0"},
}
LAYERS = ("rendezvous", "bootstrap", "interface", "ib", "container-network", "collective")
# The NCCL version a thread states, as the probe records it (torch.cuda.nccl.version()): the
# first X.Y.Z at the start of the case's `nccl`; "before 2.26.2" or "bundled with ..." say none.
_NCCL_STATED = re.compile(r"(\d+\.\d+\.\d+)(?![\d.])")
CONTRACT_GROUPS = (
    ("experiments", "decided_by"),
    ("soak",),
    ("scope", "hosts", "failed_layer", "failed_hosts"),
)


@cache
def probe_schema() -> dict[str, Any]:
    text = resources.files("gpufix").joinpath("schemas/probe.schema.json").read_text("utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def schema_errors(doc: dict[str, Any]) -> list[str]:
    validator = schema_check.validator(probe_schema())
    return [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc)
    ]


@cache
def probe_program() -> ModuleType:
    """The probe program (its cause table), loaded the way gpufix itself loads it."""
    from gpufix.probe.local import load_program

    return load_program()


def experiment_env(exp_id: str) -> tuple[dict[str, str], list[int] | None]:
    if exp_id in EXPERIMENT_ENV:
        return dict(EXPERIMENT_ENV[exp_id]), None
    if exp_id.startswith("gpus-"):
        return {}, [int(i) for i in exp_id.split("-")[1:]]
    if exp_id.startswith("ifname-"):
        name = exp_id[len("ifname-") :]
        return {"NCCL_SOCKET_IFNAME": name, "GLOO_SOCKET_IFNAME": name}, None
    raise ValueError(f"unknown experiment id {exp_id!r}")


def _order(exp_id: str) -> tuple[int, str]:
    ids = list(EXPERIMENT_ENV)
    if exp_id in ids:
        return ids.index(exp_id), exp_id
    return (len(ids), exp_id) if exp_id.startswith("gpus-") else (len(ids) + 1, exp_id)


def experiments(ev: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for exp_id, result in sorted(
        (ev.get("experiments") or {}).items(), key=lambda kv: _order(kv[0])
    ):
        env, gpus = experiment_env(exp_id)
        out.append(
            {
                "id": exp_id,
                "env": env,
                "gpus": gpus,
                "verdict": result,
                "stalled": None,
                "error": None,
                "elapsed_s": 0.0,
            }
        )
    return out


def _phases(kind: str, phase: str | None) -> list[dict[str, Any]]:
    stop = PHASES.index(phase) if phase in PHASES else len(PHASES) - 1
    records = []
    for i, name in enumerate(PHASES[: stop + 1]):
        bad = kind in ("hung", "failed") and i == stop
        end = None if bad and kind == "hung" else float(i + 1)
        records.append({"phase": name, "rank": 0, "start": float(i), "end": end, "ok": not bad})
    return records


def _causes(ev: dict[str, Any], main: dict[str, Any]) -> list[dict[str, str]]:
    p2p_off = (ev.get("experiments") or {}).get("p2p-off")
    frac = ev.get("p2p_copy_fraction")
    evidence = {
        "texts": [ev["error_text"]] if ev.get("error_text") else [],
        "main": main,
        "rerun": {"verdict": p2p_off} if p2p_off else {},
        "single": {},
        "slow": [],
        "suspects": probe_program().pair_suspects(experiments(ev)),
        "low_copy": frac is not None and frac < 0.25,
        "low_bw": False,
    }
    causes: list[dict[str, str]] = probe_program().find_causes(evidence)
    return causes


def probe_facts(case: dict[str, Any]) -> dict[str, Any]:
    """What the probe's own readings would hold: the NCCL the job loaded, when the thread says."""
    stated = (case.get("environment") or {}).get("nccl")
    m = _NCCL_STATED.match(str(stated).strip()) if stated is not None else None
    return {"nccl": m.group(1)} if m else {}


def base_verdict(case: dict[str, Any], world: int) -> dict[str, Any]:
    ev = case.get("evidence") or {}
    kind = ev["probe_verdict"]
    phase = ev.get("stalled_phase")
    where = {"phase": phase, "ranks": list(range(world))} if phase else None
    main: dict[str, Any] = {"verdict": kind}
    if kind == "hung" and where:
        main["stalled"] = where
    if kind == "failed" and where:
        main["failed_in"] = where
    p2p_off = (ev.get("experiments") or {}).get("p2p-off")
    error = ev.get("error_text") or (f"failed in {phase}" if kind == "failed" else None)
    return {
        "format": "gpufix-probe",
        "version": 1,
        "host": case["id"],
        "verdict": kind,
        "backend": "nccl",
        "world_size": world,
        "deadline_s": DEADLINE_S,
        "duration_s": DEADLINE_S if kind == "hung" else float(len(_phases(kind, phase))),
        "stalled": main.get("stalled"),
        "failed_in": main.get("failed_in"),
        "error": error,
        "phases": _phases(kind, phase),
        "slow": [],
        "single_gpu": None,
        "p2p": {"matrix": {}, "copy_gbps": {}},
        "no_p2p_rerun": {"verdict": p2p_off} if p2p_off else None,
        "allreduce": [],
        "causes": _causes(ev, main),
        "notes": ["corpus case: built from a public thread, not from a probe run"],
        "nccl_log_tail": [],
        "facts": probe_facts(case),
    }


def contract_fields(case: dict[str, Any], world: int) -> dict[str, dict[str, Any]]:
    """The contract's optional fields this case's evidence supports, by group."""
    ev = case.get("evidence") or {}
    groups: dict[str, dict[str, Any]] = {}
    exps = experiments(ev)
    if exps:
        # As the probe records them: a GPU pair never decides (pairs name suspects instead).
        decided = next((e["id"] for e in exps if e["verdict"] == "healthy" and not e["gpus"]), None)
        suspects = probe_program().pair_suspects(exps)
        groups["experiments"] = {"experiments": exps, "decided_by": decided, "suspects": suspects}
    if ev.get("soak"):
        groups["soak"] = {"soak": ev["soak"]}
    if ev.get("scope") == "multi-node":
        nodes = int((case.get("environment") or {}).get("nodes") or 2)
        groups["scope"] = {
            "scope": "multi-node",
            "hosts": [f"node{i}" for i in range(nodes)],
            "failed_layer": ev.get("failed_layer"),
            "failed_hosts": list(ev.get("failed_hosts") or []),
        }
    return groups


def verdict_for(case: dict[str, Any], world: int) -> tuple[dict[str, Any], list[str]]:
    """(verdict, contract groups held back because the schema does not accept them yet)."""
    verdict = base_verdict(case, world)
    declared = set(probe_schema().get("properties", {}))
    held: list[str] = []
    for name, fields in contract_fields(case, world).items():
        candidate = verdict | fields
        if set(fields) <= declared and not schema_errors(candidate):
            verdict = candidate
        else:
            held.append(name)
    return verdict, held
