"""`gpufix lint` and `gpufix preflight`: tools that run where the training runs, no Ansible."""

from __future__ import annotations

import sys

import click

from gpufix.cli.common import not_empty
from gpufix.workload.lint.command import lint

# `gpufix lint` lives with the rest of the lint (gpufix.workload.lint); registered here.
lint_cmd = lint


@click.command("preflight")
@click.option("--json", "as_json", is_flag=True, help="The report as JSON on stdout.")
@click.option("--probe", is_flag=True, help="Also run the multi-GPU probe in quick mode.")
@click.option(
    "--facts",
    "facts_file",
    type=click.Path(dir_okay=False),
    callback=not_empty,
    help="Check a snapshot instead of this host.",
)
def preflight_cmd(as_json: bool, probe: bool, facts_file: str | None) -> None:
    """Check this host before a training job starts.

    Exit 0: no check failed (warnings allowed); 1: a check failed; 3: bad input (docs/preflight.md).
    """
    from gpufix.workload.preflight import main_preflight

    sys.exit(main_preflight(json_out=as_json, probe=probe, facts_file=facts_file))
