"""What a probe verdict shows, as evidence keys the decision table reads (evidence_fixes.yaml).

Reads the contract's fields (experiments, decided_by, soak, multi-node scope and layer) and the
error texts; a verdict without them (gpufix-probe v1) still gives its phase, error and legacy
no-P2P rerun. Error texts are data: they are only searched for the knowledge base's substrings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from gpufix.engine.kb import KnowledgeBase

NOT_HEALTHY = ("hung", "failed", "degraded")
INIT_PHASES = ("cuda_init", "alloc")
JOB_ENV_WITHOUT = "job-env-without-"  # the job's settings but one (docs/probe.md)
# Probe cause ids that carry a text signature the verdict's own error may not repeat.
CAUSE_SIGNATURES = {
    "shm": "shm-exhausted",
    "driver-mismatch": "driver-mismatch",
    "driver-too-old": "driver-insufficient",
}
# Experiments that change an NCCL setting only: a gloo run (--cpu) reads none of them, so their
# results there say nothing (interface experiments set GLOO_SOCKET_IFNAME too).
NCCL_ONLY = frozenset(
    {"p2p-off", "p2p-level-pxb", "shm-off", "cumem-off", "ib-off", "proto-simple", "algo-ring",
     "nvls-off", "gdr-off", "mnnvl-off"}
)  # fmt: skip
# The probe's causes read from an NCCL setting's effect (CAUSES in roles/probe/files/
# gpufix_probe.py): in a gloo run they rest on settings gloo never read.
NCCL_CAUSES = frozenset(
    {"p2p-path", "p2p-path-workaround", "shm-transport", "cumem", "ib-path", "nccl-transport",
     "gpu-direct-rdma", "nccl-protocol", "nccl-algorithm", "nvls", "mnnvl"}
)  # fmt: skip
# roles/probe's verdict when it had to kill the probe program past its deadline (run.yml).
PROBE_KILLED = "the probe program itself hung"
# roles/probe's verdict when the program printed none (a traceback, a full disk, no Python):
# the program's own failure, no evidence about the GPUs (run.yml, "Make a verdict ...").
MADE_BY_ROLE = "verdict made by roles/probe: the program printed none"
PRINTED_NONE = "the probe printed no verdict"
# gpufix.probe.remote's stand-in when no verdict came back at all (unreachable, no result, none
# printed): never evidence about the GPUs
MADE_BY_GPUFIX = "verdict made by gpufix: no verdict came back"
# A rank that died rather than waited (signals, as Python's and PyTorch's errors name them).
# Not SIGABRT (signal 6): PyTorch's watchdog ends a timed-out collective by aborting the process.
_DIED = re.compile(r"(?i)signal (?!6\b)\d+|SIGSEGV|SIGKILL|SIGBUS|segmentation fault")
# Log lines that report trouble; NCCL's INFO lines name transports and files in normal runs too.
_TROUBLE = ("warn", "error", "fail")
_INFO = re.compile(r"\bNCCL INFO\b")
_JOINED = re.compile(r";\s+|\s+\|\s+")


@dataclass(frozen=True)
class Signals:
    verdict: str | None
    phase: str | None
    decided_by: str | None  # experiment id that turned the run healthy
    ran: tuple[str, ...]  # experiments with a result (not skipped)
    skipped: tuple[str, ...]
    signatures: tuple[str, ...]
    scope: str  # host | multi-node
    layer: str | None
    failed_hosts: tuple[str, ...]
    soak_stalled_at: int | None
    soak_stalled: bool
    suspects: bool = False  # GPU-pair experiments named a GPU or link whose runs fail
    tried: tuple[str, ...] = ()  # experiments that ran and still hung or failed
    kind: str | None = None  # hang | error: how the run (or else the soak) went wrong (_kind)
    cpu_run: bool = False  # gloo on CPU tensors (`--cpu`): the GPUs took no part
    job_env: tuple[str, ...] = ()  # VAR=VALUE: the job's settings the runs had (--job-env)
    job_env_culprit: str | None = None  # VAR=VALUE: the one of them that alone breaks the run
    # An NCCL run with more ranks than the host has GPUs (engine/decide.py spanned): NCCL refuses
    # two ranks on one GPU, so it joined other hosts' GPUs; scope is then multi-node.
    spanned: str | None = None
    # Ranks that never reached a collective the others had called and waited in (stalled.ranks
    # beside stalled.waiting or stalled.called): they were busy elsewhere.
    elsewhere: tuple[int, ...] = ()
    # A one-knob experiment ran (GPU pairs change no mechanism), or the legacy no-P2P rerun did.
    knob_ran: bool = False

    @property
    def unhealthy(self) -> bool:
        return self.verdict in NOT_HEALTHY

    @property
    def family(self) -> str | None:
        """The deciding experiment's family: ifname-eth0 -> ifname, gpus-0-1 -> gpus,
        job-env-without-VAR -> job-env-off (the job's settings, all or one, came off)."""
        d = self.decided_by
        if d is None:
            return None
        if d.startswith(JOB_ENV_WITHOUT):
            return "job-env-off"
        return d.split("-", 1)[0] if d.startswith(("ifname-", "gpus-")) else d

    @property
    def knobs_skipped(self) -> bool:
        """Some knob experiment did not run (budget): "none helped" is not shown yet."""
        return any(not e.startswith("gpus-") for e in self.skipped)

    @property
    def ifname(self) -> str | None:
        d = self.decided_by or ""
        return d[len("ifname-") :] if d.startswith("ifname-") else None

    def evidence(self) -> tuple[str, ...]:
        """Evidence keys, in no particular order (the table's row order decides)."""
        out: list[str] = []
        if self.family:
            out.append(f"experiment:{self.family}")
        # A --cpu run's pairs are sets of CPU ranks: they name no GPU or PCIe path.
        if self.suspects and self.family != "gpus" and not self.cpu_run:
            out.append("experiment:gpus")
        if self.layer:
            out.append(f"layer:{self.layer}")
        out += [f"signature:{s}" for s in self.signatures]
        # A gloo run's soak and "no experiment helped" point at NCCL, which it never ran.
        if self.soak_stalled:
            out.append("stall:gloo" if self.cpu_run else "soak:stalled")
        # knob experiments only: GPU pairs change no mechanism, so they say nothing of one
        knobs = [e for e in self.ran if not e.startswith("gpus-")]
        none_helped = bool(knobs) and not self.decided_by and not self.knobs_skipped
        if none_helped and self.unhealthy and not self.cpu_run:
            out.append("experiments:none-decided")
        stall = self.stall()
        if stall:
            out.append(stall)
        return tuple(dict.fromkeys(out))

    def stall(self) -> str | None:
        if not self.unhealthy:
            return None
        if self.phase == "import_torch":
            return "stall:import"
        if self.cpu_run:
            return "stall:gloo"
        if self.phase in INIT_PHASES:
            return "stall:init"
        return "stall:collective"


def _without_info(text: str) -> str:
    """An error text without NCCL's INFO lines: NCCL_DEBUG=INFO prints transports, devices and
    files on healthy runs too ("NET/IB : No device found"); failures are its WARN lines and the
    caller's exception (NCCL docs, NCCL_DEBUG: WARN "whenever any NCCL call errors out")."""
    # a hand-written verdict may join a log's lines on one ("...; ...", " | ")
    parts = (
        p
        for line in text.splitlines()
        for p in (_JOINED.split(line) if _INFO.search(line) else [line])
    )
    return "\n".join(p for p in parts if not _INFO.search(p))


def _texts(v: dict[str, Any], experiments: list[dict[str, Any]]) -> list[str]:
    texts = [_without_info(str(v.get("error") or ""))]
    texts += [_without_info(str(e.get("error") or "")) for e in experiments]
    tail = [str(x) for x in v.get("nccl_log_tail") or [] if isinstance(x, str)]
    texts += [
        line for line in tail if any(t in line.lower() for t in _TROUBLE) and not _INFO.search(line)
    ]
    return [t for t in texts if t]


def _decided(v: dict[str, Any], experiments: list[dict[str, Any]]) -> str | None:
    if isinstance(v.get("decided_by"), str):
        return str(v["decided_by"])
    # A healthy GPU pair decides nothing by itself (other pairs may be healthy too): that family
    # comes from `suspects`, which the probe fills only when some pair's runs fail.
    healthy = [
        e.get("id")
        for e in experiments
        if e.get("verdict") == "healthy" and not str(e.get("id")).startswith("gpus-")
    ]
    if healthy and isinstance(healthy[0], str):
        return healthy[0]
    rerun = (v.get("no_p2p_rerun") or {}).get("verdict")
    # The legacy field means the p2p-off experiment (the contract).
    return "p2p-off" if rerun == "healthy" and v.get("verdict") in NOT_HEALTHY else None


def _knob_ran(v: dict[str, Any], experiments: list[dict[str, Any]]) -> bool:
    if any(
        e.get("verdict") not in (None, "skipped") and not str(e.get("id")).startswith("gpus-")
        for e in experiments
    ):
        return True
    rerun = v.get("no_p2p_rerun")
    return isinstance(rerun, dict) and rerun.get("verdict") not in (None, "skipped")


def printed_none(verdict: dict[str, Any] | None) -> str | None:
    """The error of a stand-in verdict where no verdict came back: roles/probe's for a program
    that printed none (not one it killed past its deadline: that one hung), or gpufix.probe.remote's
    (unreachable, no result, nothing printed); None for any other verdict."""
    if not isinstance(verdict, dict):
        return None
    notes = verdict.get("notes")
    error = str(verdict.get("error") or "")
    if not isinstance(notes, list):
        return None
    if MADE_BY_GPUFIX in notes:  # gpufix's own: unreachable, no result, nothing printed
        return error or PRINTED_NONE
    return error if MADE_BY_ROLE in notes and error.startswith(PRINTED_NONE) else None


def cut_short(verdict: dict[str, Any] | None) -> str | None:
    """The stall line of a run whose own --deadline ran out while torch was still importing
    (the import's deadline had not): too short a run to say anything about the host."""
    if not isinstance(verdict, dict) or verdict.get("verdict") != "hung":
        return None
    st = verdict.get("stalled")
    if (
        isinstance(st, dict)
        and st.get("phase") == "import_torch"
        and st.get("by") == "probe deadline"
    ):
        return str(verdict.get("error") or "the probe deadline ran out in import_torch")
    return None


def as_evidence(verdict: dict[str, Any] | None) -> dict[str, Any] | None:
    """The verdict as the engine reads it. In a gloo run (`--cpu`) NCCL reads none of its
    settings, so the NCCL-only experiments, the legacy P2P-off rerun and the causes the probe
    read from them say nothing. A GPU pair written as `decided_by` decides nothing by itself
    (other pairs may be healthy too): that family comes from `suspects` only."""
    if verdict is None:
        return None
    v = dict(verdict)
    if v.get("backend") == "gloo":
        exps = v.get("experiments")
        if isinstance(exps, list):
            v["experiments"] = [
                e for e in exps if not (isinstance(e, dict) and e.get("id") in NCCL_ONLY)
            ]
        if v.get("decided_by") in NCCL_ONLY:
            v["decided_by"] = None
        v["no_p2p_rerun"] = None
        causes = v.get("causes")
        if isinstance(causes, list):
            v["causes"] = [
                c for c in causes if not (isinstance(c, dict) and c.get("id") in NCCL_CAUSES)
            ]
    if str(v.get("decided_by") or "").startswith("gpus-"):
        v["decided_by"] = None
    soak = v.get("soak")
    went = soak.get("verdict") if isinstance(soak, dict) else None
    if v.get("verdict") == "healthy" and went in ("hung", "failed"):
        # The probe writes a soak that went wrong as the run's verdict (docs/probe.md, Soak);
        # a verdict written by hand may keep the main run's "healthy" beside it.
        v["verdict"] = went
        where = "failed_in" if went == "failed" else "stalled"
        if not isinstance(v.get(where), dict):
            v[where] = {"phase": "soak", "ranks": []}
    return v


def read(verdict: dict[str, Any] | None, kb: KnowledgeBase) -> Signals:
    v = as_evidence(verdict) or {}
    exps = [e for e in v.get("experiments") or [] if isinstance(e, dict)]
    where = v.get("stalled") or v.get("failed_in") or {}
    phase = where.get("phase") if isinstance(where, dict) else None
    text = "\n".join(_texts(v, exps))
    sigs = [s.id for s in kb.error_signatures if s.found_in(text)]
    causes = [c.get("id") for c in v.get("causes") or [] if isinstance(c, dict)]
    sigs += [CAUSE_SIGNATURES[c] for c in causes if c in CAUSE_SIGNATURES]
    soak: dict[str, Any] = v["soak"] if isinstance(v.get("soak"), dict) else {}
    at = soak.get("stalled_at_bytes")
    return Signals(
        verdict=v.get("verdict"),
        phase=phase if isinstance(phase, str) else None,
        decided_by=_decided(v, exps),
        ran=tuple(str(e.get("id")) for e in exps if e.get("verdict") not in (None, "skipped")),
        skipped=tuple(str(e.get("id")) for e in exps if e.get("verdict") == "skipped"),
        signatures=tuple(dict.fromkeys(sigs)),
        scope="multi-node" if v.get("scope") == "multi-node" else "host",
        layer=_layer(v, phase),
        failed_hosts=tuple(str(h) for h in v.get("failed_hosts") or []),
        soak_stalled_at=at if isinstance(at, int) else None,
        soak_stalled=soak.get("verdict") in ("hung", "failed") or isinstance(at, int),
        suspects=_suspects(v),
        elsewhere=_elsewhere(v.get("stalled"), str(v.get("error") or "")),
        tried=tuple(str(e.get("id")) for e in exps if e.get("verdict") in ("hung", "failed")),
        kind=_kind(v, phase, soak, kb),
        cpu_run=v.get("backend") == "gloo",
        job_env=_job_env(v),
        job_env_culprit=_job_env_culprit(v, _decided(v, exps)),
        knob_ran=_knob_ran(v, exps),
    )


def _layer(v: dict[str, Any], phase: object) -> str | None:
    """The multi-node layer that failed. A run that went wrong in the rendezvous phase (the ranks
    meeting at MASTER_ADDR's store, before any process group or NCCL) failed in that layer
    whatever `failed_layer` says, as a verdict written by hand may leave it null."""
    if isinstance(v.get("failed_layer"), str):
        return str(v["failed_layer"])
    return "rendezvous" if phase == "rendezvous" and v.get("verdict") in NOT_HEALTHY else None


def _job_env(v: dict[str, Any]) -> tuple[str, ...]:
    env = v.get("job_env")
    if not isinstance(env, dict):
        return ()
    return tuple(f"{k}={val}" for k, val in sorted(env.items()) if isinstance(val, str))


def _job_env_culprit(v: dict[str, Any], decided: str | None) -> str | None:
    """The culprit as VAR=VALUE: one of the verdict's job settings, named by the runs without
    them (job-env-off decided), and one the run's backend reads (gloo reads no NCCL setting)."""
    env, var = v.get("job_env"), v.get("job_env_culprit")
    if not isinstance(env, dict) or not isinstance(var, str) or not isinstance(env.get(var), str):
        return None
    if decided != "job-env-off" and not str(decided).startswith(JOB_ENV_WITHOUT):
        return None
    if v.get("backend") == "gloo" and var.startswith(("NCCL_", "TORCH_NCCL_")):
        return None
    return f"{var}={env[var]}"


def _kind(v: dict[str, Any], phase: object, soak: dict[str, Any], kb: KnowledgeBase) -> str | None:
    """hang or error, as nccl_issues.yaml's `kind` says; None when the run does not show which.
    A run that failed on PyTorch's collective timeout (the watchdog ends a hang) hung, unless a
    rank died first (a merged multi-node error holds every culprit's: a crash on one host is
    what the others timed out on); only the run's own error counts, not an experiment's. A
    probe the role killed past its deadline hung. A failure with no phase (a multi-node host
    that gave no verdict) shows neither."""
    verdict = v.get("verdict")
    if verdict == "hung":
        return "hang"
    if verdict == "failed":
        own = _without_info(str(v.get("error") or ""))
        if PROBE_KILLED in own:
            return "hang"
        timeout = any(s.id == "collective-timeout" and s.found_in(own) for s in kb.error_signatures)
        if timeout and not _DIED.search(own):
            return "hang"
        return "error" if isinstance(phase, str) or timeout else None
    if verdict == "healthy":
        return {"hung": "hang", "failed": "error"}.get(str(soak.get("verdict")))
    return None


def _elsewhere(where: object, error: str) -> tuple[int, ...]:
    """stalled.ranks when other ranks had made the call (stalled.waiting or stalled.called):
    those ranks never reached the collective; in a real NCCL hang every rank is in it. Not
    failed_in (its ranks died), nor a run whose error shows a rank that died."""
    if not isinstance(where, dict) or _DIED.search(_without_info(error)):
        return ()
    ranks = _ints(where.get("ranks"))
    others = [r for key in ("waiting", "called") for r in _ints(where.get(key)) if r not in ranks]
    return tuple(ranks) if ranks and others else ()


def _ints(value: object) -> list[int]:
    if not isinstance(value, list):
        return []
    return [r for r in value if isinstance(r, int) and not isinstance(r, bool)]


def _suspects(v: dict[str, Any]) -> bool:
    found = v.get("suspects")
    return isinstance(found, dict) and bool(found.get("gpus") or found.get("links"))
