"""`gpufix lint` and `gpufix preflight`: tools that run where the training runs, no Ansible."""

from __future__ import annotations

import sys

import click


@click.command("lint")
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--json", "fmt", flag_value="json", help="Findings as JSON on stdout.")
@click.option(
    "--sarif", "fmt", flag_value="sarif", help="Findings as SARIF 2.1.0 (for CI annotations)."
)
def lint_cmd(paths: tuple[str, ...], fmt: str | None) -> None:
    """Find CUDA_VISIBLE_DEVICES set after torch is imported, and other self-inflicted hangs.

    Exit 0: clean; 1: findings; 3: bad input (see docs/lint.md).
    """
    from gpufix.lint import main_lint

    sys.exit(main_lint(paths, fmt or "text"))


@click.command("preflight")
@click.option("--json", "as_json", is_flag=True, help="The report as JSON on stdout.")
@click.option("--probe", is_flag=True, help="Also run the multi-GPU probe in quick mode.")
@click.option(
    "--facts",
    "facts_file",
    type=click.Path(dir_okay=False),
    help="Check a snapshot instead of this host.",
)
def preflight_cmd(as_json: bool, probe: bool, facts_file: str | None) -> None:
    """Check this host before a training job starts.

    Exit 0: no check failed (warnings allowed); 1: a check failed; 3: bad input (docs/preflight.md).
    """
    from gpufix.workload.preflight import main_preflight

    sys.exit(main_preflight(json_out=as_json, probe=probe, facts_file=facts_file))
