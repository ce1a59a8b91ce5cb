"""`gpufix facts | plan | diff | probe`: the commands that read hosts. Parse, call, print."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from gpufix.cli.common import (
    changes_exit,
    detailed_exitcode_option,
    emit_json,
    file_option,
    forks_option,
    inventory_option,
    inventory_path,
    json_option,
    not_empty,
    progress,
    timeout_option,
)
from gpufix.errors import EXIT_ERROR, EXIT_UNREACHABLE, GpufixError, InvalidInput
from gpufix.inputs import one_line
from gpufix.strategies import NAMES as STRATEGIES


def _inventory_inputs(output: str | None, target: str, inventory: str | None) -> list[str]:
    """With -o: the inventory and the recorded snapshots of the hosts TARGET names, files the
    command reads too (a review: `plan a -o inv.yml` replaced the inventory with a plan, and
    `-o` on a host's own snapshot broke every later plan of it)."""
    if not output:
        return []
    from gpufix.inventory import resolve

    inv = inventory_path(inventory)
    found = [str(inv)] if inv.is_file() else []
    with contextlib.suppress(GpufixError):  # the command's own run of it says what is wrong
        found += [str(t.snapshot) for t in resolve(target, inv) if t.snapshot is not None]
    return found


def _not_an_input(output: str | None, *inputs: str | None) -> None:
    """-o must not name a file the command reads: the plan would replace its own input."""
    if not output:
        return
    for given in inputs:
        try:
            same = bool(given) and os.path.samefile(output, str(given))
        except OSError:  # either one missing: not the same file
            continue
        if same:
            raise InvalidInput(f"-o {output} is the input {given}: write the output elsewhere")


@click.command("facts")
@click.argument("host")
@inventory_option
@file_option("-o", "--output", help="Write the snapshot to FILE.")
@click.option(
    "--python-env",
    "python_envs",
    multiple=True,
    metavar="PYTHON",
    help="Interpreter whose packages to read: an absolute path (repeatable).",
)
@timeout_option
@json_option
def facts(
    host: str,
    inventory: str | None,
    output: str | None,
    python_envs: tuple[str, ...],
    facts_timeout: int,
    as_json: bool,
) -> None:
    """Gather facts from HOST (or read its recorded snapshot) and print or save them."""
    from gpufix.facts.collect import one
    from gpufix.facts.snapshot import save_snapshot
    from gpufix.planning import check_python_envs

    check_python_envs(list(python_envs))
    _not_an_input(output, *_inventory_inputs(output, host, inventory))
    snap = one(
        host,
        inventory_path(inventory),
        python_envs=list(python_envs) or None,
        progress=progress,
        timeout=facts_timeout,
    )
    if output:
        save_snapshot(snap, Path(output))
        click.echo(f"wrote {one_line(output, 4000)}", err=True)
        if not as_json:
            return
    emit_json(snap.to_doc())


def _load_verdict(path: str | None) -> dict[str, Any] | None:
    """Through the input layer: regular file, size cap, the probe's schema."""
    from gpufix.inputs import load_probe_verdict

    return load_probe_verdict(path) if path else None


def _conflicts(**given: object) -> None:
    """Refuse options that contradict each other instead of ignoring one silently."""
    named = [k for k, v in given.items() if v]
    if len(named) > 1:
        flags = " and ".join("--" + k.replace("_", "-") for k in named)
        raise InvalidInput(f"{flags} cannot be used together")


def _only_with(flag: str, names: tuple[str, ...]) -> None:
    """Refuse options given on the command line that only `flag` uses (never ignore one)."""
    ctx = click.get_current_context()
    given = [n for n in names if ctx.get_parameter_source(n) is not ParameterSource.DEFAULT]
    if given:
        opts = ", ".join("--" + n.replace("_", "-") for n in given)
        raise InvalidInput(f"{opts}: only with {flag}")


@click.command("plan")
@click.argument("target")
@inventory_option
@file_option("--facts", "facts_file", help="Plan from a snapshot file, offline.")
@click.option(
    "--strategy", type=click.Choice(STRATEGIES), help="Force a strategy (refused if infeasible)."
)
@click.option(
    "--probe", "run_probe", is_flag=True, help="Run the multi-GPU probe first and use its verdict."
)
@file_option("--probe-verdict", help="Use a saved probe verdict (JSON).")
@click.option(
    "--job-env",
    multiple=True,
    metavar="VAR=VALUE",
    help="With --probe: a setting the training job runs with (repeatable; as gpufix probe).",
)
@click.option(
    "--allow-reboot/--no-reboot",
    "allow_reboot",
    default=True,
    show_default=True,
    help="Consider strategies that need a reboot (apply still reboots only with --allow-reboot).",
)
@click.option("--single-gpu-ok", is_flag=True, help="Training does not need several GPUs.")
@click.option("--no-containers", is_flag=True, help="Containers are not an option here.")
@click.option(
    "--image",
    metavar="REF@sha256:DIGEST",
    callback=not_empty,
    help="Image for container-fallback, pinned by digest.",
)
@click.option(
    "--torch",
    "torch_release",
    metavar="VERSION",
    callback=not_empty,
    help="With --strategy cuda-downgrade: the torch release to install (it must fit, and carry "
    "a fix the plan asks for).",
)
@click.option(
    "--python-env",
    "python_envs",
    multiple=True,
    metavar="PYTHON",
    help=(
        "Interpreter on the hosts whose torch stack to read: an absolute path (repeatable; "
        "default: the host's python3)."
    ),
)
@file_option("-o", "--output", help="Save the plan to PLANFILE.")
@click.option(
    "-v", "--verbose", is_flag=True, help="For several hosts: every plan in full after the summary."
)
@forks_option
@timeout_option
@detailed_exitcode_option
@json_option
def plan(
    target: str,
    inventory: str | None,
    facts_file: str | None,
    strategy: str | None,
    run_probe: bool,
    probe_verdict: str | None,
    job_env: tuple[str, ...],
    allow_reboot: bool,
    single_gpu_ok: bool,
    no_containers: bool,
    image: str | None,
    torch_release: str | None,
    python_envs: tuple[str, ...],
    output: str | None,
    verbose: bool,
    forks: int,
    facts_timeout: int,
    detailed_exitcode: bool,
    as_json: bool,
) -> None:
    """Decide what to change on TARGET (host or group) and why.

    One host: the whole plan. Several: one summary row per host (--verbose adds every plan).
    Exit 0 when planning succeeded; with --detailed-exitcode, 2 when changes are proposed.
    """
    from gpufix.engine.context import Constraints
    from gpufix.engine.plan import save_plans
    from gpufix.planning import make_plans

    _conflicts(facts=facts_file, probe=run_probe)  # a snapshot cannot be probed
    _conflicts(probe=run_probe, probe_verdict=probe_verdict)
    # a snapshot records the interpreters it was gathered with: a plan from it naming others
    # could never be applied ("not the interpreters the recorded facts were gathered with")
    _conflicts(facts=facts_file, python_env=python_envs)
    if facts_file and inventory and not Path(inventory).exists():
        raise InvalidInput(f"inventory not found: {inventory}")
    _not_an_input(output, facts_file, probe_verdict, *_inventory_inputs(output, target, inventory))
    if job_env and not run_probe:
        raise InvalidInput("--job-env: only with --probe (a saved verdict records its own)")
    if job_env:
        from gpufix.probe.options import ProbeOptions

        ProbeOptions(job_env=job_env).check()  # before facts are gathered
    constraints = Constraints(
        reboot_allowed=allow_reboot,
        multi_gpu_required=not single_gpu_ok,
        strategy=strategy,
        containers_allowed=not no_containers,
        container_image=image,
        torch=torch_release,
    )
    got = make_plans(
        target,
        inventory_path(inventory),
        constraints,
        facts_file=Path(facts_file) if facts_file else None,
        verdict=_load_verdict(probe_verdict),
        run_probe=run_probe,
        job_env=job_env,
        python_envs=list(python_envs) or None,
        progress=progress,
        forks=forks,
        facts_timeout=facts_timeout,
    )
    plans, failures = got.plans, got.failures
    if output and plans:  # no host planned: the failures below say why, no file is written
        save_plans(plans, Path(output))
        click.echo(f"wrote {one_line(output, 4000)}", err=True)
    for f in failures:
        click.echo(f"gpufix: {one_line(f.host)}: {one_line(f.error, 2000)}", err=True)
    if as_json:
        emit_json(
            {
                "plans": [p.to_dict() for p in plans],
                "failed": [{"host": f.host, "error": f.error} for f in failures],
            }
        )
    else:
        _show_plans(plans, verbose)
    if failures:
        code = EXIT_UNREACHABLE if any(f.unreachable for f in failures) else EXIT_ERROR
        names = ", ".join(f.host for f in failures)
        # each failure's own reason is on its line above (facts, or a probe that never reached it)
        raise GpufixError(
            f"no host planned: {names}" if not plans else f"not planned: {names}", code
        )
    sys.exit(changes_exit(any(p.changes for p in plans), detailed_exitcode))


def _show_plans(plans: list[Any], verbose: bool) -> None:
    from gpufix.cli import render

    c = render.console()
    if len(plans) > 1:
        render.plan_summary(c, plans)
        if not verbose:
            c.print("details: gpufix plan HOST, or --verbose for every plan")
            return
        c.print()
    for p in plans:
        render.plan(c, p)


@click.command("diff")
@click.argument("refs", nargs=-1, required=True, metavar="HOST|GROUP|SNAPSHOT...")
@inventory_option
@click.option(
    "--all", "show_all", is_flag=True, help="Every fact that differs: identifiers, matrix cells."
)
@forks_option
@timeout_option
@detailed_exitcode_option
@json_option
def diff(
    refs: tuple[str, ...],
    inventory: str | None,
    show_all: bool,
    forks: int,
    facts_timeout: int,
    detailed_exitcode: bool,
    as_json: bool,
) -> None:
    """Compare hosts or snapshots side by side: what matters for start-up hangs, differences first.

    Two or more hosts, groups (every host in them) or snapshot files; with three or more, the
    host that differs most from the rest comes first.
    """
    from gpufix.cli import render
    from gpufix.facts.diff import compare, diff_all

    named = _named_facts(refs, inventory, forks=forks, timeout=facts_timeout)
    if len(named) < 2:
        # `diff host01 host01` (a typo for the second host) compared a host with itself
        what = f"{refs[0]!r} names" if len(refs) < 2 else f"{', '.join(map(repr, refs))} name"
        raise InvalidInput(f"{what} one host: diff needs two or more")
    comparison = compare(named)
    raw = diff_all(named) if show_all else None
    if as_json:
        doc = comparison.to_dict()
        if raw is not None:
            hosts = [n for n, _ in named]
            doc["all"] = [{"path": p, "values": dict(zip(hosts, v, strict=True))} for p, v in raw]
        emit_json(doc)
    else:
        c = render.console()
        render.comparison(c, comparison)
        if raw is not None:
            render.raw_diff(c, [n for n, _ in named], raw)
    changed = bool(raw) if raw is not None else bool(comparison.differences)
    sys.exit(changes_exit(changed, detailed_exitcode))


def _named_facts(
    refs: tuple[str, ...], inventory: str | None, *, forks: int, timeout: int
) -> list[tuple[str, Mapping[str, Any]]]:
    """(name, facts) for each snapshot file or each host a pattern matches, in order, once."""
    from gpufix.facts.collect import gather
    from gpufix.facts.snapshot import load_snapshot

    out: dict[str, Mapping[str, Any]] = {}
    files: set[tuple[int, int]] = set()  # one snapshot under two spellings (./x.json, a link)
    for ref in refs:
        if ref.endswith(".json") or os.sep in ref:
            facts = load_snapshot(Path(ref)).facts
            st = os.stat(ref)
            if (st.st_dev, st.st_ino) not in files:
                files.add((st.st_dev, st.st_ino))
                out.setdefault(ref, facts)
            continue
        got = gather(
            ref, inventory_path(inventory), progress=progress, forks=forks, timeout=timeout
        )
        bad = [g for g in got if g.snapshot is None]
        if bad:
            code = EXIT_UNREACHABLE if any(g.unreachable for g in bad) else EXIT_ERROR
            raise GpufixError("; ".join(f"{g.host}: {g.error}" for g in bad), code)
        for g in got:
            assert g.snapshot is not None
            out.setdefault(g.host, g.snapshot.facts)
    return list(out.items())


def _soak_option(name: str, flag: str, **kw: Any) -> Any:
    """One of the sweep's sizes or counts, as nccl-tests names it; used only with --soak."""
    return click.option(name, show_default=True, help=f"nccl-tests {flag} (--soak).", **kw)


@click.command("probe")
@click.argument("target")
@inventory_option
@click.option(
    "--deadline",
    type=click.IntRange(5, 3600),
    default=120,
    show_default=True,
    help="Seconds before the probe gives a verdict, whatever happens (experiments come after).",
)
@click.option("--phase-deadline", type=click.IntRange(1, 600), default=30, show_default=True)
@click.option("--import-deadline", type=click.IntRange(0, 1200), default=0, help="0: 2x phase.")
@click.option("--cpu", is_flag=True, help="Self-test on CPU (gloo) where there is no GPU.")
@click.option("--world-size", type=click.IntRange(1, 64), help="Ranks (per host; one per GPU).")
@click.option(
    "--python",
    "--python-env",
    "python",
    metavar="PYTHON",
    help=(
        "The training environment's interpreter on the hosts (default: the host's python3; "
        "here: this one)."
    ),
)
@click.option("--no-experiments", is_flag=True, help="No reruns with one mechanism changed.")
@click.option("--experiment-budget", type=click.IntRange(0, 3600), default=180, show_default=True)
@click.option("--soak", is_flag=True, help="All-reduce size sweep after the main phases.")
@_soak_option("--soak-min-bytes", "-b", default="1K")
@_soak_option("--soak-max-bytes", "-e", default="64M")
@_soak_option("--soak-factor", "-f", type=click.IntRange(1, 1024), default=4)
@_soak_option("--soak-iters", "-n", type=click.IntRange(1, 100000), default=20)
@click.option("--ifname", help="NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME for the ranks.")
@click.option(
    "--job-env",
    multiple=True,
    metavar="VAR=VALUE",
    help="A setting the training job runs with (NCCL_*, GLOO_*, CUDA_*, ...; repeatable).",
)
@click.option("--multi-node", is_flag=True, help="Probe TARGET's hosts as one multi-node job.")
@click.option("--master-addr", help="The first host's address (default: inventory, facts).")
@click.option("--master-port", type=click.IntRange(1, 65535), default=29500, show_default=True)
@forks_option
@json_option
def probe(target: str, inventory: str | None, forks: int, as_json: bool, **kw: Any) -> None:
    """Run the multi-GPU probe on TARGET; exit 0 healthy or not applicable, 5 otherwise.

    A host another gpufix run is changing is not probed (exit 1 when nothing worse happened).
    """
    from gpufix.probe import command
    from gpufix.probe.options import ProbeOptions, Soak

    names = ("soak_min_bytes", "soak_max_bytes", "soak_factor", "soak_iters")
    soak = [kw.pop(k) for k in names]
    if not kw["soak"]:
        _only_with("--soak", names)
    options = ProbeOptions(
        soak=Soak(*soak) if kw.pop("soak") else None,
        experiments=not kw.pop("no_experiments"),
        multi_node=kw.pop("multi_node"),
        job_env=tuple(kw.pop("job_env")),
        **kw,
    )
    path = inventory_path(inventory)
    sys.exit(command.run(target, path, options, as_json=as_json, progress=progress, forks=forks))
