"""`gpufix probe GROUP --multi-node`: one rank group per host, started at once through Ansible
(playbooks/probe_multinode.yml via gpufix.runner), meeting at a store on the first host over the
real network path. When the run is not healthy, experiments rerun it with one mechanism changed
(interface, IB, NCCL protocol...), each its own multi-host run, within a budget."""

from __future__ import annotations

import time
import uuid
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from gpufix import inputs, runner, versions
from gpufix.engine.diagnose import p2p_refusal_honoured
from gpufix.engine.gpu_names import with_named_board, with_named_caps
from gpufix.engine.kb import load as load_knowledge
from gpufix.engine.signals import NCCL_ONLY
from gpufix.errors import GpufixError, InvalidInput, Unreachable
from gpufix.facts.host import from_facts as host_of
from gpufix.inventory import Target, resolve
from gpufix.probe import busy, merge, multiverdict, nodes, stop
from gpufix.probe.merge import MergedOutcome, Part
from gpufix.probe.options import ProbeOptions

# Ansible's own share of one run: connecting, copying the program, the preflight tasks.
_ANSIBLE_S = 120
# What the NCCL knobs can change between hosts, tried after the interfaces and IB.
_COLLECTIVE_KNOBS = ["proto-simple", "algo-ring", "p2p-off", "shm-off", "cumem-off"]


def plan(
    outcome: MergedOutcome,
    candidates: list[str],
    infiniband: bool,
    job_env: bool = False,
    mnnvl: bool = False,
    nvls: bool = False,
    p2p_refused: bool = False,
    gloo: bool = False,
) -> list[str]:
    """Experiments for a run that is not healthy: the job's own settings off (when it has any),
    the network path, then NCCL's knobs. `mnnvl`: some host's GPUs are of a model that forms
    multi-node NVLink domains (gpu_models.yaml); `nvls`: some host has NVLink SHARP
    (`nvlink_sharp`); `p2p_refused`: every host's driver refuses P2P between its GPUs, so
    p2p-off changes nothing (NCCL uses no P2P transport there); `gloo`: the ranks run gloo
    (--cpu), which reads no NCCL setting, so only the interfaces and the job's settings count."""
    if outcome.phase not in ("pg_init", "barrier", "allreduce", "soak"):
        return []  # rendezvous: only the address and port matter; inside a host: its own probe
    todo = _plan(outcome, candidates, infiniband, mnnvl, nvls)
    if p2p_refused:
        todo = [t for t in todo if t != "p2p-off"]
    if gloo:
        todo = [t for t in todo if t not in NCCL_ONLY]
    return (["job-env-off"] if job_env else []) + todo


def _plan(
    outcome: MergedOutcome, candidates: list[str], infiniband: bool, mnnvl: bool, nvls: bool
) -> list[str]:
    ifs = [f"ifname-{name}" for name in candidates]
    ib = ["ib-off"] if infiniband else []
    # GPU Direct RDMA off keeps InfiniBand, staged through host memory: narrower than IB off,
    # so tried first once data moves (NCCL registers GPU memory with the NIC at connection).
    gdr = ["gdr-off"] if infiniband else []
    # Multi-node NVLink off: one mechanism of these racks alone, set up while the communicator
    # is created (clique enrollment, IMEX memory) and used by every collective; one run, before
    # the interfaces and knobs that change every host's path.
    mn = ["mnnvl-off"] if mnnvl else []
    # NVLink SHARP off: its buffers are bound while the communicator is created, and since NCCL
    # 2.18.1 its inter-node algorithms (NVLS, NVLSTree) carry collectives between hosts; tried
    # after the network path, which fails far more often.
    sharp = ["nvls-off"] if nvls else []
    if outcome.phase == "pg_init":
        return mn + ifs + ib + sharp
    if outcome.phase in ("barrier", "allreduce", "soak"):
        return mn + gdr + ib + ifs + sharp + _COLLECTIVE_KNOBS
    return []  # rendezvous: only the address and port matter; inside a host: its own probe


def forms_multi_node_nvlink(facts: list[dict[str, Any]]) -> bool:
    """Some host's GPUs are of a model whose systems join several hosts in one NVLink domain."""
    kb = load_knowledge()
    return any(kb.forms_multi_node_nvlink(name) for name in nodes.gpu_names(facts))


def nvlink_sharp(facts: list[dict[str, Any]]) -> bool:
    """Some host has NVLink SHARP: an NVSwitch board (facts.host.Host.nvswitch) with GPUs of
    compute capability 9.0 or later (Hopper on: NVLink SHARP needs third-generation NVSwitch),
    or a model that forms multi-node NVLink domains."""
    kb = load_knowledge()
    for f in facts:
        h = with_named_board(with_named_caps(host_of(f), kb), kb)
        if h.nvswitch and any(versions.at_least(c, "9.0") for c in h.compute_caps):
            return True
    return forms_multi_node_nvlink(facts)


def p2p_refused_everywhere(facts: list[dict[str, Any]]) -> bool:
    """Every host's `nvidia-smi topo -p2p r` refuses P2P between its GPUs (none unread), and its
    NCCL goes by that in every process (2.19.1 on: engine.diagnose.p2p_refusal_honoured)."""
    kb = load_knowledge()
    return bool(facts) and all(p2p_refusal_honoured(host_of(f), kb) for f in facts)


def _extravars(
    hosts: list[str],
    opts: ProbeOptions,
    master: str,
    experiment: str | None,
    deadline: int,
    key: str,
) -> dict[str, Any]:
    ev: dict[str, Any] = {
        "gpufix_probe_nodes": hosts,
        "gpufix_probe_master_addr": master,
        "gpufix_probe_master_port": opts.master_port,
        # Each run its own keys in the store: a run that has not ended cannot join this one.
        # The key also finds the run's programs on the hosts (probe.stop).
        "gpufix_probe_store_key": key,
        "gpufix_probe_deadline": deadline,
        "gpufix_probe_phase_deadline": opts.phase_deadline,
        "gpufix_probe_import_deadline": opts.import_deadline,
        "gpufix_probe_experiment": experiment or "",
        "gpufix_probe_ifname": opts.ifname or "",
        "gpufix_probe_job_env": list(opts.job_env),
    }
    if opts.soak:
        ev.update(
            gpufix_probe_soak=True,
            gpufix_probe_soak_min_bytes=opts.soak.min_bytes,
            gpufix_probe_soak_max_bytes=opts.soak.max_bytes,
            gpufix_probe_soak_factor=opts.soak.factor,
            gpufix_probe_soak_iters=opts.soak.iters,
        )
    # Only what the user gave: the inventory's own settings stay otherwise.
    if opts.cpu:
        ev["gpufix_probe_cpu"] = True
    if opts.world_size:
        ev["gpufix_probe_world_size"] = opts.world_size
    if opts.python:
        ev["gpufix_probe_python"] = opts.python
    return ev


def run_once(
    hosts: list[str],
    inventory: Path,
    opts: ProbeOptions,
    master: str,
    experiment: str | None,
    deadline: int,
    progress: runner.Progress | None,
) -> list[Part]:
    """One multi-host run: every host's part (its verdict, or why there is none)."""
    key = uuid.uuid4().hex[:12]
    try:
        res = runner.run_playbook(
            "probe_multinode.yml",
            inventory,
            limit=",".join(hosts),
            extravars=_extravars(hosts, opts, master, experiment, deadline, key),
            forks=len(hosts),  # every host at once, or the first waits for the others forever
            timeout=deadline + _ANSIBLE_S + 60,
            progress=progress,
        )
    except KeyboardInterrupt:
        # Stopping Ansible does not stop the programs it started on the hosts: stop them.
        raise KeyboardInterrupt(_stopped(hosts, inventory, key, opts, master, deadline)) from None
    parts = []
    for h in hosts:
        hr = res.hosts.get(h)
        verdict = hr.data.get("gpufix_probe_verdict") if hr else None
        if hr is None:
            parts.append(Part(h, None, f"no result from ansible ({res.status})"))
        elif hr.status in ("unreachable", "failed") or not isinstance(verdict, dict):
            parts.append(Part(h, None, f"{hr.status}: {hr.message}" if hr.message else hr.status))
        else:
            parts.append(_checked(h, verdict))
    return parts


def _stopped(
    hosts: list[str], inventory: Path, key: str, opts: ProbeOptions, master: str, deadline: int
) -> str:
    """What an interrupted run left on the hosts, after trying to stop it."""
    left = stop.stop(hosts, inventory, {"gpufix_probe_store_key": key})
    return stop.interrupted(
        hosts,
        left,
        f"they end by their own deadline (about {deadline} s, killed at their hard limit past "
        f"it); until then port {opts.master_port} on {master} stays in use, and a new run on "
        "that port fails there (store-port-busy)",
    )


def _checked(host: str, verdict: dict[str, Any]) -> Part:
    """A host's verdict is data from that host: one that breaks the probe's schema is no part,
    and the host is named for it (before, a string where an object belongs crashed the merge)."""
    try:
        inputs.check_tree(verdict, f"{host}'s verdict")
        inputs.check_probe_verdict(verdict, f"{host}'s verdict")
    except GpufixError as exc:
        return Part(host, None, f"unusable verdict: {exc}")
    return Part(host, verdict)


def ranks_per_host(target: Target, facts: dict[str, Any] | None, opts: ProbeOptions) -> int | None:
    """How many ranks the host's probe will start (roles/probe: --world-size, else one per GPU,
    2 with --cpu); None when its GPUs are not known."""
    if opts.world_size:
        return int(opts.world_size)
    own = str(target.vars.get("gpufix_probe_world_size", "")).strip()
    if own.isdigit() and int(own) > 0:
        return int(own)
    if opts.cpu or str(target.vars.get("gpufix_probe_cpu")).lower() in ("true", "yes", "1"):
        return 2
    gpus = (facts or {}).get("gpus")
    return len(gpus) if isinstance(gpus, list) and gpus else None


def check_same_ranks(targets: list[Target], facts: dict[str, Any], opts: ProbeOptions) -> None:
    """The program numbers a host's ranks node x per-host + local, as torchrun does with one
    --nproc-per-node: hosts that would start different numbers of ranks would share rank
    numbers, and the run would read as a blocked store. Refused before anything runs."""
    counts = {t.name: ranks_per_host(t, facts.get(t.name), opts) for t in targets}
    if None in counts.values() or len(set(counts.values())) < 2:
        return
    said = ", ".join(f"{h} {n}" for h, n in counts.items())
    raise InvalidInput(
        f"the hosts would start different numbers of ranks ({said}): a multi-node job runs the "
        "same number on each host; give --world-size (or the same gpufix_probe_world_size)"
    )


def _targets(pattern: str, inventory: Path) -> list[Target]:
    targets = resolve(pattern, inventory)
    recorded = [t.name for t in targets if t.snapshot is not None]
    if recorded:
        raise InvalidInput(f"{', '.join(recorded)}: recorded from a snapshot; nothing to probe")
    if len(targets) < 2:
        raise InvalidInput(f"{pattern!r} is one host; a multi-node probe needs two or more")
    return targets


def _facts(
    pattern: str, inventory: Path, progress: runner.Progress | None, forks: int
) -> dict[str, Any]:
    from gpufix.facts.collect import gather

    got = gather(pattern, inventory, progress=progress, forks=forks)
    missing = [g for g in got if g.snapshot is None]
    if missing:
        text = "no facts, so no multi-node probe: " + "; ".join(
            f"{g.host}: {g.error}" for g in missing
        )
        raise (Unreachable if any(g.unreachable for g in missing) else GpufixError)(text)
    return {g.host: g.snapshot.facts for g in got if g.snapshot is not None}


def probe_group(
    pattern: str,
    inventory: Path,
    opts: ProbeOptions,
    progress: runner.Progress | None = None,
    forks: int = runner.FORKS,
) -> dict[str, Any]:
    """Probe the hosts of `pattern` as one multi-node job; the merged, validated verdict."""
    from gpufix.probe.local import validate

    opts.check()
    t0 = time.monotonic()
    targets = _targets(pattern, inventory)
    hosts = [t.name for t in targets]
    held = busy.held_hosts(hosts, [], inventory, progress=progress, forks=forks)
    if held:  # one job over every host: none is probed
        raise GpufixError("; ".join(f"{h}: {why}" for h, why in held.items()))
    facts = _facts(pattern, inventory, progress, forks)
    check_same_ranks(targets, facts, opts)
    addr = opts.master_addr or nodes.master_addr(
        hosts[0], targets[0].vars, facts.get(hosts[0]), opts.ifname
    )
    master = f"{addr}:{opts.master_port}"
    candidates = nodes.ifname_candidates(list(facts.values()), opts.ifname)
    parts = run_once(hosts, inventory, opts, addr, None, opts.deadline, progress)
    run = multiverdict.MultiRun(
        target=pattern,
        hosts=hosts,
        parts=parts,
        outcome=merge.combine(parts),
        layer=None,
        master=master,
        deadline_s=opts.deadline,
        phase_deadline_s=opts.phase_deadline,
        ifname=opts.ifname,
        candidates=candidates,
        job_env=dict(item.partition("=")[::2] for item in opts.job_env),
    )
    if run.outcome.verdict in ("hung", "failed") and opts.experiments:
        ib = nodes.has_infiniband(list(facts.values()))
        mnnvl = forms_multi_node_nvlink(list(facts.values()))
        nvls = nvlink_sharp(list(facts.values()))
        refused = p2p_refused_everywhere(list(facts.values()))
        todo = plan(
            run.outcome, candidates, ib, bool(opts.job_env), mnnvl, nvls, refused, gloo=opts.cpu
        )
        _experiments(run, todo, inventory, opts, addr, progress)
    private = nodes.private_container_network(list(facts.values()))
    run.layer = merge.layer(run.outcome, run.decided_by, private)
    run.duration_s = time.monotonic() - t0
    return validate(multiverdict.build(run, _program()))


def _experiments(
    run: multiverdict.MultiRun,
    todo: list[str],
    inventory: Path,
    opts: ProbeOptions,
    addr: str,
    progress: runner.Progress | None,
) -> None:
    """Each experiment a whole multi-host run, cheapest first, until one is healthy; after
    job-env-off, which one of the job's settings it is."""
    end = time.monotonic() + opts.experiment_budget
    run.decided_by = _until_healthy(run, todo, inventory, opts, addr, progress, end)
    if run.decided_by == "job-env-off":
        _culprit(run, inventory, opts, addr, progress, end)


def _until_healthy(
    run: multiverdict.MultiRun,
    todo: list[str],
    inventory: Path,
    opts: ProbeOptions,
    addr: str,
    progress: runner.Progress | None,
    end: float,
) -> str | None:
    """The first of these runs that is healthy; each recorded, what the budget leaves no time
    for as skipped."""
    for i, exp_id in enumerate(todo):
        left = int(end - time.monotonic())
        own = (opts.import_deadline or 2 * opts.phase_deadline) + 3 * opts.phase_deadline
        if left < min(opts.phase_deadline, 5):
            why = f"experiment budget of {opts.experiment_budget} s spent"
            run.experiments += [_skipped(x, why) for x in todo[i:]]
            return None
        t = time.monotonic()
        job, knob = _job_settings(exp_id, opts)
        parts = run_once(run.hosts, inventory, job, addr, knob, min(left, own), progress)
        out = merge.combine(parts)
        run.experiments.append(_record(exp_id, out, time.monotonic() - t))
        if out.verdict == "healthy":
            return exp_id
    return None


def _job_settings(exp_id: str, opts: ProbeOptions) -> tuple[ProbeOptions, str | None]:
    """The options and program experiment of one run: job-env-off is the run without the job's
    settings, job-env-without-VAR without that one (the hosts' own values back, as on one host);
    the others are the program's experiments."""
    if exp_id == "job-env-off":
        return replace(opts, job_env=()), None
    without = _program().WITHOUT
    if exp_id.startswith(without):
        var = exp_id[len(without) :]
        return replace(opts, job_env=tuple(i for i in opts.job_env if _name(i) != var)), None
    return opts, exp_id


def _name(item: str) -> str:
    return item.partition("=")[0]


def _culprit(
    run: multiverdict.MultiRun,
    inventory: Path,
    opts: ProbeOptions,
    addr: str,
    progress: runner.Progress | None,
    end: float,
) -> None:
    """Which of the job's settings the failure needs: the only one that can change a run, or
    each taken off alone (job-env-without-VAR, name order) until a run is healthy (the
    program's find_culprit)."""
    suspects = [n for n in sorted(_name(i) for i in opts.job_env) if _matters(n, opts)]
    if len(suspects) == 1:
        _name_culprit(run, opts, suspects[0], "the only one of them that changes the run")
        return
    without = _program().WITHOUT
    todo = [without + n for n in suspects]
    found = _until_healthy(run, todo, inventory, opts, addr, progress, end)
    if found:
        _name_culprit(run, opts, found[len(without) :], f"{found} was healthy")
    elif len(todo) > 1 and all(e["verdict"] != "skipped" for e in run.experiments):
        run.notes.append(
            "no run without one of the job's settings was healthy: more than one of them breaks "
            "the run on its own; take them all out, or probe with each alone"
        )


def _matters(var: str, opts: ProbeOptions) -> bool:
    """False for a setting whose removal cannot change a run: an interface --ifname sets in
    every run, an NCCL setting in a gloo run (--cpu)."""
    if opts.ifname and var in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"):
        return False
    return not (opts.cpu and var.startswith(("NCCL_", "TORCH_NCCL_")))


def _name_culprit(run: multiverdict.MultiRun, opts: ProbeOptions, var: str, because: str) -> None:
    value = next(i.partition("=")[2] for i in opts.job_env if _name(i) == var)
    run.job_env_culprit = var
    run.notes.append(
        f"the run needs the job's {var}={value} to fail here ({because}): taking it out of the "
        "job is the first thing to try"
    )


@lru_cache(maxsize=1)
def _program() -> Any:
    """The probe program, for its experiment vocabulary and cause table (one home for both)."""
    from gpufix.probe.local import load_program

    return load_program()


def _env(exp_id: str) -> dict[str, str]:
    env, _ = _program().experiment_env(exp_id)
    return dict(env)


def _record(exp_id: str, out: MergedOutcome, elapsed: float) -> dict[str, Any]:
    stalled = {"phase": out.phase, "ranks": out.ranks} if out.verdict == "hung" else None
    return {
        "id": exp_id,
        "env": _env(exp_id),
        "gpus": None,
        "verdict": out.verdict,
        "stalled": stalled,
        "error": out.error if out.verdict in ("hung", "failed") else None,
        "elapsed_s": round(elapsed, 3),
    }


def _skipped(exp_id: str, why: str) -> dict[str, Any]:
    return {
        "id": exp_id,
        "env": _env(exp_id),
        "gpus": None,
        "verdict": "skipped",
        "stalled": None,
        "error": why,
        "elapsed_s": 0.0,
    }
