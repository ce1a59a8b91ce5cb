"""The decision engine: a pure function of (facts, probe verdict, constraints, knowledge) -> Plan.

Order of preference: what the facts show is broken (driver, fabric manager, the wheel), then the
decision table's row for what the probe shows (knowledge/evidence_fixes.yaml), then the other
evidence, then the field notes' tree as the floor (pin a stack, containers). `single-gpu` only
when the user allows it; when nothing the evidence calls for is feasible, `none` with the facts
or experiments that would decide.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from gpufix import versions
from gpufix.engine import os_family, signals, table
from gpufix.engine.context import Candidate, Constraints, Ctx
from gpufix.engine.diagnose import findings, no_p2p, shares_switch
from gpufix.engine.explain import explain, interim_for, leftover_workarounds, verify_defaults
from gpufix.engine.gpu_names import with_named_board, with_named_caps
from gpufix.engine.held import all_held, in_force, text
from gpufix.engine.kb import KnowledgeBase
from gpufix.engine.needs import name_host
from gpufix.engine.plan import Option, Plan, digest
from gpufix.engine.probe_facts import with_probe_facts
from gpufix.engine.rules import Rules
from gpufix.engine.stack import stack
from gpufix.errors import InvalidInput
from gpufix.facts.host import Host, from_facts
from gpufix.strategies import NAMES, REGISTRY
from gpufix.strategies.evidence import (
    DRIVER_CAUSES,
    DRIVER_TOO_OLD,
    SHM_CAUSES,
    TRANSPORT_CAUSES,
    across_hosts,
    p2p_evidence,
)

# ---------------------------------------------------------------- ordering

Prefer = Callable[[str, str], None]  # (strategy, why): ask for a strategy, in order


def _driver_and_stack(ctx: Ctx, want: Prefer) -> None:
    if ctx.has("driver-library-mismatch"):
        want("driver-pin", "driver/library mismatch")
    if ctx.has("fabricmanager-missing") or ctx.has("fabricmanager-version-mismatch"):
        want("driver-pin", "NVSwitch fabric manager missing or at another version")
    if ctx.has("driver-cannot-drive-gpus"):
        want("driver-pin", "the installed driver cannot drive every GPU in the host")
    if ctx.has("torch-cuda-needs-newer-driver") or ctx.has("gpu-arch-dropped"):
        if ctx.has("driver-branch-unsupported") and ctx.has("torch-cuda-needs-newer-driver"):
            # NVIDIA no longer fixes the running branch: moving to a supported one fixes both.
            want("driver-pin", "the driver's branch is past support and too old for the wheel")
        want("cuda-downgrade", "torch wheel cannot run on this driver/GPU (no reboot needed)")
        want("driver-pin", "or raise the driver to what the wheel needs")
    # A release-note driver range alone is a warning: the decision table moves the driver only
    # when the probe shows that issue's symptom (driver-known-issue rows, evidence_fixes.yaml).


def _p2p(ctx: Ctx, want: Prefer) -> None:
    h = ctx.host
    if ctx.has("gpu-no-p2p"):
        want("nccl-profile", "GPUs without PCIe P2P: NCCL_P2P_DISABLE=1 is the fix (nccl#1127)")
    evidence = p2p_evidence(ctx)
    if evidence and not no_p2p(h, ctx.kb):
        want("pcie-acs", f"{evidence}; ACS/IOMMU is the cause NCCL documents")
        want("nccl-profile", "no-P2P as the fallback")
    elif evidence:
        want("nccl-profile", f"{evidence}; these GPUs have no P2P to repair")


def _ordering(ctx: Ctx, want: Prefer, diagnosed: bool = False) -> list[str]:
    """Ask for what the findings and the probe's causes call for; return what was left unasked
    because nothing but a warning points at it and there is no verdict. When the decision table
    named a fix (`diagnosed`), the reboots only a warning points at (a kernel below accelerate's
    threshold, ACS or the IOMMU on root ports) are not alternatives to it: a risk factor is not
    the diagnosis."""
    h = ctx.host
    _driver_and_stack(ctx, want)
    _p2p(ctx, want)
    if ctx.has("shm-too-small") or ctx.cause(*SHM_CAUSES):
        want("container-fix", "/dev/shm too small for NCCL")
    if ctx.has("container-private-network"):
        want("container-fix", "container without host networking")
    if ctx.cause(*DRIVER_TOO_OLD):
        want("cuda-downgrade", "probe: CUDA says the driver is too old for torch's CUDA")
    if ctx.cause(*DRIVER_CAUSES):
        want("driver-pin", "probe points at the driver (mismatch or CUDA init trouble)")
    if ctx.cause(*TRANSPORT_CAUSES):
        want("nccl-profile", "probe: NCCL stalled with P2P off too (transport or interface)")
    static_acs = ctx.has("acs-enabled-above-gpus") or ctx.has("iommu-translated")
    kernel = ctx.has("kernel-below-accelerate-threshold") and not ctx.has(
        "kernel-at-release-ceiling"
    )
    if ctx.verdict is None:
        # Warnings alone never choose a reboot: without a verdict nothing says they cause the
        # hang (issue 12, item 7). The plan needs `probe`; --strategy still applies either.
        deferred = []
        if static_acs:
            deferred.append("ACS redirect or translating IOMMU above the GPUs (pcie-acs)")
        if kernel:
            deferred.append("kernel below accelerate's threshold (kernel-upgrade)")
        return deferred
    if static_acs and shares_switch(h):
        want("pcie-acs", "ACS redirect or translating IOMMU above GPUs that share a PCIe switch")
    if diagnosed:
        return []
    if kernel:
        want("kernel-upgrade", "kernel below accelerate's threshold and a newer HWE kernel exists")
    if static_acs:
        want(
            "pcie-acs",
            "ACS redirect or translating IOMMU on the GPUs' root ports (no probe evidence)",
        )
    return []


def _probe_floor(ctx: Ctx, want: Prefer) -> None:
    """The probe is not healthy: NCCL settings, then the field notes' tree. Never single-gpu:
    hiding GPUs is a workaround the user must allow (--single-gpu-ok)."""
    want("nccl-profile", "probe not healthy; next, NCCL settings, where the evidence names one")
    want(
        "cuda-downgrade",
        "probe not healthy, no specific cause: pin a stack that fits (field notes: pin torch)",
    )
    want("container-fallback", "then containers (field notes)")


def _later_hangs(ctx: Ctx) -> list[str]:
    """nccl-known-issue rows that show only after start-up (a soak stall)."""
    ids = {i for f in ctx.found if f.id == "nccl-known-issue" for i in f.evidence["issues"]}
    return [i.id for i in ctx.kb.nccl_issues if i.id in ids and "soak:stalled" in i.shows]


def preference(ctx: Ctx) -> tuple[list[str], list[str]]:
    """Strategies in the order the evidence calls for them, and the decision path that led there.

    Only these are chosen from; when none is feasible the plan is `none` and says what is missing.
    """
    h, v = ctx.host, ctx.verdict or {}
    path: list[str] = []
    order: list[str] = []

    def want(s: str, why: str) -> None:
        if s not in order:
            order.append(s)
            path.append(f"{why} -> {s}")

    if ctx.signals is not None and ctx.signals.spanned:
        path.append(ctx.signals.spanned)
    if h.gpu_count == 0:
        path.append("no NVIDIA GPU -> none (not applicable)")
        return ["none"], path
    if h.gpu_count == 1 and not across_hosts(ctx):
        path.append(
            "one GPU: no hang between GPUs of this host can happen here (a job across hosts: "
            "the multi-node probe) -> none"
        )
        return ["none"], path
    if h.gpu_count == 1:
        path.append(
            "one GPU on this host in a run across hosts: what joins the hosts still can hang"
        )
    if not ctx.c.multi_gpu_required:
        want("single-gpu", "multi-GPU not required (--single-gpu-ok)")
    probe = v.get("verdict")
    if probe == "healthy" and not any(f.severity == "error" for f in ctx.found):
        path.append("probe healthy and no error findings -> none")
        later = _later_hangs(ctx)
        if later and not v.get("soak"):
            path.append(
                f"NCCL has a documented hang the start-up probe cannot show ({', '.join(later)}): "
                "run `gpufix probe HOST --soak` to look for it"
            )
        return ["none", *order], path
    _driver_and_stack(ctx, want)
    d = ctx.decision
    held = text(all_held(ctx))
    if held:
        path.append(
            f"the run that was not healthy already had {held} (an administrator's NCCL config or "
            "the job's settings): what turns those mechanisms off is not its cure, and fixes "
            "that rest on them pass over"
        )
    if d is not None and d.fix == "none":
        want("none", f"{d.line()}; nothing on this host to change")
        return order, path
    if d is not None:
        want(d.fix, d.line())
        if d.interim and in_force(ctx, d.interim) is None:
            # What the evidence says works now comes before anything the evidence did not call
            # for (a kernel below accelerate's threshold is a risk factor, not this diagnosis);
            # an interim the failing run already had is none.
            want(
                "nccl-profile",
                f"{', '.join(d.interim)}: the interim beside {d.fix}, and the fix where "
                f"{d.fix} cannot be applied",
            )
    deferred = _ordering(ctx, want, diagnosed=d is not None)
    if probe in ("hung", "failed", "degraded") and d is None:
        _probe_floor(ctx, want)
    elif d is not None:
        # A diagnosis keeps what carries it out another way: NCCL settings the evidence names,
        # and a stack move the host cannot take (glibc, Python, driver) in a pinned image.
        want("nccl-profile", "next, NCCL settings, where the evidence names one")
        if d.fix == "cuda-downgrade":
            want(
                "container-fallback",
                "the stack move in a pinned image, where the host cannot take it",
            )
    elif not order:
        if deferred:
            path.append(
                "not chosen without a probe verdict (warnings, no evidence they cause the hang): "
                + "; ".join(deferred)
            )
        path.append("no error findings and no probe evidence: run `gpufix probe HOST`")
        order.append("none")
    return order, path


def decide(
    facts: Mapping[str, Any],
    verdict: dict[str, Any] | None = None,
    constraints: Constraints | None = None,
    *,
    kb: KnowledgeBase,
    rules: Rules,
    host_name: str = "",
) -> Plan:
    """No I/O here: the caller loads the knowledge base (gpufix.engine.kb.load) and rules (gpufix.engine.rules.load)."""
    c = constraints or Constraints()
    if c.strategy is not None and c.strategy not in REGISTRY:
        raise InvalidInput(f"unknown strategy {c.strategy!r}; choose one of: {', '.join(NAMES)}")
    ctx = context(facts, verdict, c, kb, rules)
    order, path = preference(ctx)
    cands = {s: REGISTRY[s].evaluate(ctx) for s in NAMES}
    ranked = order + [s for s in NAMES if s not in order]
    options = [
        Option(
            s,
            cands[s].feasible,
            name_host(cands[s].reason, host_name),
            ranked.index(s) if s in order else 99,
        )
        for s in ranked
    ]
    chosen = _choose(ctx, order, cands, path, host_name)
    path = [name_host(line, host_name) for line in path]
    risks = [name_host(r, host_name) for r in [*chosen.risks, *leftover_workarounds(ctx, chosen)]]
    if (
        chosen.strategy != "none"
        and ctx.has("kernel-below-accelerate-threshold")
        and chosen.strategy != "kernel-upgrade"
    ):
        check = kb.accelerate_kernel_check
        acc = ctx.host.env.accelerate if ctx.host.env else None
        quiet = bool(acc) and versions.at_least(acc or "", check.since_accelerate) is False
        risks.append(
            "the kernel stays below accelerate's threshold (a risk factor): "
            + (
                f"accelerate >= {check.since_accelerate} would warn of it"
                if quiet
                else "its warning remains"
            )
        )
    other_os = os_family.risk(ctx.host, chosen.steps)
    if other_os:
        risks.append(other_os)
    return Plan(
        host=host_name,
        strategy=chosen.strategy,
        findings=list(ctx.found),
        options=options,
        steps=chosen.steps,
        reboot_required=chosen.reboot,
        outcome=chosen.outcome,
        risks=risks,
        path=path,
        facts_digest=digest(stable_facts(facts)),
        kb_digest=str(kb.digest),
        # As the engine read it: a hand-written "healthy" beside a soak that hung is "hung".
        probe_verdict=(signals.as_evidence(verdict) or {}).get("verdict"),
        # The facts the plan was made from, so a stale-plan refusal can name what changed.
        # plan_date: the day support windows were judged on, so the plan can be re-derived.
        extra={
            **chosen.extra,
            **explain(ctx, chosen, _passed_missing(order, cands, chosen), host_name),
            "nccl_defaults": verify_defaults(ctx, chosen),
            "facts": stable_facts(facts),
            "plan_date": ctx.day.isoformat(),
        },
        interim=interim_for(ctx, chosen),
    )


def context(
    facts: Mapping[str, Any],
    verdict: dict[str, Any] | None,
    c: Constraints,
    kb: KnowledgeBase,
    rules: Rules,
) -> Ctx:
    """The engine's view of one host: facts, findings, what the probe shows, the table's row."""
    verdict = signals.as_evidence(verdict)
    shown = verdict  # what the findings report
    if signals.printed_none(verdict) or signals.cut_short(verdict):
        # The probe program broke (roles/probe's stand-in), or its own --deadline ended the run
        # before torch had imported: no evidence, as if no probe had run.
        verdict = None
    host = with_named_board(with_named_caps(with_probe_facts(from_facts(facts), verdict), kb), kb)
    day = c.plan_date or kb.checked()
    order_sev = {"error": 0, "warning": 1, "info": 2}
    found = sorted(
        findings(host, shown, kb, rules, day), key=lambda f: order_sev.get(f.severity, 3)
    )
    base = Ctx(host, verdict, c, kb, rules, stack(host, kb), tuple(found), day)
    sig = spanned(signals.read(verdict, kb), verdict, host)
    with_signals = replace(base, signals=sig)
    return replace(with_signals, decision=table.choose(with_signals, sig))


def spanned(sig: signals.Signals, verdict: dict[str, Any] | None, host: Host) -> signals.Signals:
    """A host-scope NCCL verdict with more ranks than this host has GPUs ran across hosts: NCCL
    refuses two ranks on one GPU ("Duplicate GPU detected", src/init.cc), so the other ranks were
    on other hosts' GPUs. Read as a multi-node run, whose layer no probe named."""
    v = verdict or {}
    ranks, gpus = v.get("world_size"), host.gpu_count
    node: dict[str, Any] = v["node"] if isinstance(v.get("node"), dict) else {}
    if (
        sig.scope != "host"
        or v.get("backend") != "nccl"
        or not isinstance(ranks, int)
        or isinstance(ranks, bool)
        or not gpus
        # GPUs nvidia-smi could not reach are left out of the list, not out of the host
        or ranks <= gpus + len(host.gpu_errors)
        # two ranks on one GPU, as NCCL said (the probe's --world-size may exceed the GPUs),
        # or a rank that asked for a GPU index the host does not have (more ranks than GPUs)
        or "duplicate-gpu" in sig.signatures
        or "invalid-device-ordinal" in sig.signatures
        or node.get("nnodes") == 1
    ):
        return sig
    return replace(
        sig,
        scope="multi-node",
        spanned=f"the NCCL run had {ranks} ranks and this host has {gpus} GPU(s): NCCL refuses "
        "two ranks on one GPU, so the run spanned hosts",
    )


def _passed_missing(
    order: list[str], cands: dict[str, Candidate], chosen: Candidate
) -> tuple[str, ...]:
    """What the strategies the evidence ranked above the chosen one lack (their `missing`):
    the facts that would let the evidence's first answer be judged (issue 12, item 7)."""
    out: list[str] = []
    for s in order:
        if s == chosen.strategy:
            break
        if not cands[s].feasible:
            out += cands[s].missing
    return tuple(out)


# Evidence about the driver or the Python environment, not about GPUs talking to each other:
# it decides whether or not the GPUs could be listed (NVML's version mismatch is often why
# nvidia-smi lists nothing).
COUNT_FREE = frozenset(
    {"signature:driver-mismatch", "signature:compat-driver-mismatch",
     "signature:driver-insufficient", "signature:system-not-ready",
     "signature:no-kernel-image", "stall:init", "stall:import"}
)  # fmt: skip


def _waits_on_gpus(ctx: Ctx, chosen: Candidate) -> bool:
    """An unhealthy verdict's multi-GPU evidence chose a change, on a host whose GPUs nobody
    could list (a run across hosts used them: its evidence is about what joins the hosts)."""
    v = ctx.verdict or {}
    if ctx.host.gpu_count is not None or chosen.strategy == "none" or ctx.c.strategy:
        return False
    if across_hosts(ctx):
        return False
    if v.get("verdict") not in signals.NOT_HEALTHY:
        return False
    d = ctx.decision
    return d is None or d.evidence not in COUNT_FREE


def _choose(
    ctx: Ctx, order: list[str], cands: dict[str, Candidate], path: list[str], host_name: str
) -> Candidate:
    c = ctx.c
    if c.strategy:
        forced = cands[c.strategy]
        if not forced.feasible:
            raise InvalidInput(
                f"strategy {c.strategy} is not feasible for {host_name or 'this host'}: {forced.reason}"
            )
        path.append(f"forced by the user -> {c.strategy}")
        return forced
    chosen = next((cands[s] for s in order if cands[s].feasible), cands["none"])
    for s in order:
        if s == chosen.strategy:
            break
        path.append(f"{s} not feasible: {cands[s].reason}")
        if "gpus" in cands[s].missing:
            # The evidence's answer waits on a GPU list nobody could read: passing over it to
            # a later strategy (a kernel reboot) would choose on an unknown (issue 12, item 7).
            path.append("the GPUs could not be listed: gather facts again -> none (see needs)")
            return replace(cands["none"], missing=["gpus"])
    if _waits_on_gpus(ctx, chosen):
        path.append(
            f"{chosen.strategy} rests on multi-GPU evidence and the GPUs could not be listed "
            "(one GPU, or none, would make it moot): gather facts again -> none (see needs)"
        )
        return replace(cands["none"], missing=["gpus"])
    if chosen.strategy == "none" and "none" not in order:
        path.append(
            "nothing the evidence calls for is feasible -> none (each line above says why; the "
            "needs, when there are any, say what would decide)"
        )
    return chosen


# Facts that change between two gatherings without anything being changed on the host.
VOLATILE = ("gpu_processes", "kernel_log", "module_version", "python")


# Interfaces a container runtime adds and removes as containers come and go (Docker: docker0,
# br-<network>, veth<id> per container; podman/CNI: podman<N>, cni-podman<N>, cni0; libvirt:
# virbr). NCCL skips docker* and virbr* itself (NCCL_SOCKET_IFNAME, env.html); a host running
# containers would otherwise never hold still long enough for a plan to be applied.
CHURNING_INTERFACES = ("veth", "docker", "br-", "podman", "cni", "virbr")


def stable_facts(facts: Mapping[str, Any]) -> dict[str, Any]:
    """The facts a plan depends on: without volatile readings and container interfaces."""
    out = {k: v for k, v in facts.items() if k not in VOLATILE}
    net = out.get("network")
    if isinstance(net, dict) and isinstance(net.get("interfaces"), list):
        kept = [
            i
            for i in net["interfaces"]
            if not (isinstance(i, dict) and str(i.get("name", "")).startswith(CHURNING_INTERFACES))
        ]
        out["network"] = {**net, "interfaces": kept}
    return out
