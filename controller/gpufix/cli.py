"""The gpufix command line: parse, call, print. Exit codes: docs/exit-codes.md."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from gpufix import __version__
from gpufix.errors import (
    EXIT_CHANGES,
    EXIT_ERROR,
    EXIT_INVALID,
    EXIT_OK,
    EXIT_UNREACHABLE,
    GpufixError,
    InvalidInput,
)
from gpufix.plan import STRATEGIES


def _inventory(value: str | None) -> Path:
    from gpufix.paths import default_inventory

    # The runner works from the project folder: a relative path must not change meaning.
    return Path(value).resolve() if value else default_inventory()


def _progress(host: str, msg: str) -> None:
    if sys.stderr.isatty() or os.environ.get("GPUFIX_PROGRESS"):
        click.echo(f"  {host}: {msg}", err=True)


def _emit_json(obj: Any) -> None:
    click.echo(json.dumps(obj, indent=2, default=str))


inventory_option = click.option(
    "-i",
    "--inventory",
    "inventory",
    metavar="PATH",
    help="Ansible inventory (default: inventory/example.yml).",
)
json_option = click.option("--json", "as_json", is_flag=True, help="JSON alone on stdout.")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gpufix")
def main_group() -> None:
    """Diagnose and fix multi-GPU PyTorch start-up hangs on Linux GPU hosts."""


@main_group.command()
@click.argument("host")
@inventory_option
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the snapshot to FILE.")
@click.option(
    "--python-env",
    "python_envs",
    multiple=True,
    metavar="PYTHON",
    help="Interpreter whose packages to read (repeatable).",
)
@json_option
def facts(
    host: str,
    inventory: str | None,
    output: str | None,
    python_envs: tuple[str, ...],
    as_json: bool,
) -> None:
    """Gather facts from HOST (or read its recorded snapshot) and print or save them."""
    from gpufix.collect import one
    from gpufix.facts import save_snapshot

    snap = one(
        host, _inventory(inventory), python_envs=list(python_envs) or None, progress=_progress
    )
    if output:
        save_snapshot(snap, Path(output))
        click.echo(f"wrote {output}", err=True)
        if not as_json:
            return
    _emit_json(snap.to_doc())


def _load_verdict(path: str | None) -> dict[str, Any] | None:
    if not path:
        return None
    try:
        doc = json.loads(Path(path).read_text())
    except OSError as exc:
        raise InvalidInput(f"cannot read probe verdict {path}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"probe verdict {path} is not JSON: {exc.msg}") from None
    if not isinstance(doc, dict) or doc.get("format") != "gpufix-probe":
        raise InvalidInput(f"{path} is not a gpufix probe verdict")
    return doc


@main_group.command()
@click.argument("target")
@inventory_option
@click.option(
    "--facts",
    "facts_file",
    type=click.Path(dir_okay=False),
    help="Plan from a snapshot file, offline.",
)
@click.option(
    "--strategy", type=click.Choice(STRATEGIES), help="Force a strategy (refused if infeasible)."
)
@click.option(
    "--probe", "run_probe", is_flag=True, help="Run the multi-GPU probe first and use its verdict."
)
@click.option(
    "--probe-verdict", type=click.Path(dir_okay=False), help="Use a saved probe verdict (JSON)."
)
@click.option("--no-reboot", is_flag=True, help="Only strategies that need no reboot.")
@click.option("--single-gpu-ok", is_flag=True, help="Training does not need several GPUs.")
@click.option("--no-containers", is_flag=True, help="Containers are not an option here.")
@click.option(
    "--image", metavar="REF@sha256:DIGEST", help="Image for container-fallback, pinned by digest."
)
@click.option(
    "--python-env",
    "python_envs",
    multiple=True,
    metavar="PYTHON",
    help="Interpreter on the hosts whose torch stack to read (repeatable; default: python3).",
)
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Save the plan to PLANFILE.")
@json_option
def plan(
    target: str,
    inventory: str | None,
    facts_file: str | None,
    strategy: str | None,
    run_probe: bool,
    probe_verdict: str | None,
    no_reboot: bool,
    single_gpu_ok: bool,
    no_containers: bool,
    image: str | None,
    python_envs: tuple[str, ...],
    output: str | None,
    as_json: bool,
) -> None:
    """Decide what to change on TARGET (host or group) and why. Exit 0: nothing to do; 2: changes."""
    from gpufix import render
    from gpufix.decide import Constraints, decide
    from gpufix.facts import load_snapshot
    from gpufix.kb import load as load_kb
    from gpufix.plan import save_plans
    from gpufix.rules import load as load_rules

    constraints = Constraints(
        reboot_allowed=not no_reboot,
        multi_gpu_required=not single_gpu_ok,
        strategy=strategy,
        containers_allowed=not no_containers,
        container_image=image,
    )
    if image and "@sha256:" not in image:
        raise InvalidInput(f"--image {image!r} is not pinned by digest (REF@sha256:DIGEST)")
    kb = load_kb()
    rules = load_rules()
    verdict = _load_verdict(probe_verdict)
    failures: list[tuple[str, str, bool]] = []
    if facts_file:
        snaps = [load_snapshot(Path(facts_file))]
    else:
        from gpufix.collect import gather

        got = gather(
            target, _inventory(inventory), python_envs=list(python_envs) or None, progress=_progress
        )
        snaps = [g.snapshot for g in got if g.snapshot is not None]
        failures = [(g.host, g.error, g.unreachable) for g in got if g.snapshot is None]
    verdicts: dict[str, dict[str, Any] | None] = {s.host: verdict for s in snaps}
    if run_probe and not facts_file:
        from gpufix.probe.remote import probe_hosts

        for host, v in probe_hosts(
            [s.host for s in snaps], _inventory(inventory), progress=_progress
        ).items():
            verdicts[host] = v
    plans = [
        decide(s.facts, verdicts.get(s.host), constraints, kb=kb, rules=rules, host_name=s.host)
        for s in snaps
    ]
    if python_envs:  # apply re-gathers with the same interpreters to check the plan is fresh
        plans = [replace(p, extra={**p.extra, "python_envs": list(python_envs)}) for p in plans]
    if output:
        save_plans(plans, Path(output))
        click.echo(f"wrote {output}", err=True)
    for host, err, _ in failures:
        click.echo(f"gpufix: {host}: {err}", err=True)
    if as_json:
        _emit_json(
            {
                "plans": [p.to_dict() for p in plans],
                "failed": [{"host": h, "error": e} for h, e, _ in failures],
            }
        )
    else:
        c = render.console()
        for p in plans:
            render.plan(c, p)
    if failures and not plans:
        code = EXIT_UNREACHABLE if any(u for _, _, u in failures) else EXIT_ERROR
        raise GpufixError(f"no facts from {', '.join(h for h, _, _ in failures)}", code)
    if failures:
        sys.exit(EXIT_UNREACHABLE)
    sys.exit(EXIT_CHANGES if any(p.changes for p in plans) else EXIT_OK)


@main_group.command()
@click.argument("a")
@click.argument("b")
@inventory_option
@json_option
def diff(a: str, b: str, inventory: str | None, as_json: bool) -> None:
    """Compare two hosts or snapshot files; what matters for multi-GPU start-up first."""
    from gpufix import render
    from gpufix.diff import diff as diff_facts

    fa, fb = _facts_of(a, inventory), _facts_of(b, inventory)
    diffs = diff_facts(fa, fb)
    if as_json:
        _emit_json([{"path": d.path, "a": d.a, "b": d.b} for d in diffs])
    else:
        c = render.console()
        if not diffs:
            c.print("no differences")
        for d in diffs:
            c.print(f"{d.path}\n  {a}: {render.short(d.a)}\n  {b}: {render.short(d.b)}")
    sys.exit(EXIT_CHANGES if diffs else EXIT_OK)


def _facts_of(ref: str, inventory: str | None) -> Mapping[str, Any]:
    from gpufix.facts import load_snapshot

    if ref.endswith(".json") or os.sep in ref:
        return load_snapshot(Path(ref)).facts
    from gpufix.collect import one

    return one(ref, _inventory(inventory), progress=_progress).facts


@main_group.command()
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
    help="The training environment's interpreter on the hosts (default: python3; here: this one).",
)
@click.option("--no-experiments", is_flag=True, help="No reruns with one mechanism changed.")
@click.option("--experiment-budget", type=click.IntRange(0, 3600), default=180, show_default=True)
@click.option("--soak", is_flag=True, help="All-reduce size sweep after the main phases.")
@click.option("--soak-min-bytes", default="1K", show_default=True, help="nccl-tests -b.")
@click.option("--soak-max-bytes", default="64M", show_default=True, help="nccl-tests -e.")
@click.option("--soak-factor", type=click.IntRange(1, 1024), default=4, show_default=True)
@click.option("--soak-iters", type=click.IntRange(1, 100000), default=20, show_default=True)
@click.option("--ifname", help="NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME for the ranks.")
@click.option("--multi-node", is_flag=True, help="Probe TARGET's hosts as one multi-node job.")
@click.option("--master-addr", help="The first host's address (default: inventory, facts).")
@click.option("--master-port", type=click.IntRange(1, 65535), default=29500, show_default=True)
@json_option
def probe(target: str, inventory: str | None, as_json: bool, **kw: Any) -> None:
    """Run the multi-GPU probe on TARGET; exit 0 healthy or not applicable, 5 otherwise."""
    from gpufix.probe import command
    from gpufix.probe.options import ProbeOptions, Soak

    soak = [kw.pop(k) for k in ("soak_min_bytes", "soak_max_bytes", "soak_factor", "soak_iters")]
    options = ProbeOptions(
        soak=Soak(*soak) if kw.pop("soak") else None,
        experiments=not kw.pop("no_experiments"),
        multi_node=kw.pop("multi_node"),
        **kw,
    )
    sys.exit(
        command.run(target, _inventory(inventory), options, as_json=as_json, progress=_progress)
    )


def _optional_commands() -> None:
    """Commands that live in their own modules; registered here so the CLI stays one entry point."""
    for module, names in (
        ("gpufix.cli_apply", ("apply", "status", "rollback")),
        ("gpufix.cli_tools", ("lint", "preflight")),
    ):
        try:
            mod = __import__(module, fromlist=list(names))
        except ImportError:
            continue
        for name in names:
            cmd = getattr(mod, f"{name}_cmd", None) or getattr(mod, name, None)
            if isinstance(cmd, click.Command):
                main_group.add_command(cmd, name)


_optional_commands()


def main(argv: list[str] | None = None) -> None:
    """Entry point: one-line errors, stable exit codes, no tracebacks for user errors."""
    try:
        rv = main_group.main(args=argv, prog_name="gpufix", standalone_mode=False)
    except GpufixError as exc:
        click.echo(f"gpufix: error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.UsageError as exc:
        msg = exc.format_message()
        hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx else ""
        click.echo(f"gpufix: error: {msg}{hint}", err=True)
        sys.exit(EXIT_INVALID)
    except click.Abort:
        click.echo("gpufix: aborted", err=True)
        sys.exit(130)
    except KeyboardInterrupt:
        click.echo("gpufix: interrupted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        click.echo(f"gpufix: error: {exc.format_message()}", err=True)
        sys.exit(EXIT_INVALID)
    except Exception as exc:  # a bug: one line, traceback only when asked
        if os.environ.get("GPUFIX_DEBUG"):
            raise
        click.echo(
            f"gpufix: internal error: {type(exc).__name__}: {exc} (GPUFIX_DEBUG=1 shows the traceback)",
            err=True,
        )
        sys.exit(EXIT_ERROR)
    sys.exit(rv if isinstance(rv, int) else EXIT_OK)
