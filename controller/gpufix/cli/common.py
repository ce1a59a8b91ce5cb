"""What every command shares: the inventory, JSON, forks and timeout options, progress lines,
JSON output."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import click

from gpufix.inputs import one_line
from gpufix.runner import FACTS_TIMEOUT_S, FORKS, PLAYBOOK_TIMEOUT_S


def not_empty(_ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """An option given as "" (an unset shell variable) is refused, never read as "not given":
    `--facts "$SNAP"` must not fall back to gathering live, nor `-i "$INV"` to the example
    fleet."""
    values = value if isinstance(value, tuple) else (value,)
    if any(v is not None and not str(v).strip() for v in values):
        from gpufix.errors import InvalidInput

        name = param.opts[-1] if isinstance(param, click.Option) else param.human_readable_name
        raise InvalidInput(f"{name}: an empty value (an unset variable?)")
    return value


def file_option(*decls: str, help: str) -> Any:
    """An option naming one file to read or write; "" is refused (not_empty)."""
    return click.option(*decls, type=click.Path(dir_okay=False), callback=not_empty, help=help)


inventory_option = click.option(
    "-i",
    "--inventory",
    "inventory",
    metavar="PATH",
    callback=not_empty,
    help="Ansible inventory (default: the example inventory shipped with gpufix, "
    "inventory/example.yml in the content `gpufix --version` names).",
)
# Passed to every Ansible run of the command as its --forks, so it wins over ANSIBLE_FORKS and
# ansible.cfg (docs/operations.md).
forks_option = click.option(
    "--forks",
    type=click.IntRange(1, 500),
    default=FORKS,
    show_default=True,
    metavar="N",
    help="Hosts Ansible works on at once.",
)
timeout_option = click.option(
    "--timeout",
    "facts_timeout",
    type=click.IntRange(1, 86400),
    default=FACTS_TIMEOUT_S,
    show_default=True,
    metavar="SECONDS",
    help="Limit on one fact-gathering run, all hosts together; hosts not done by then fail.",
)
playbook_timeout_option = click.option(
    "--playbook-timeout",
    type=click.IntRange(60, 86400),
    default=PLAYBOOK_TIMEOUT_S,
    show_default=True,
    metavar="SECONDS",
    help="Limit on one playbook run that changes hosts (one step of a batch; a rollback).",
)
json_option = click.option("--json", "as_json", is_flag=True, help="JSON alone on stdout.")
detailed_exitcode_option = click.option(
    "--detailed-exitcode",
    is_flag=True,
    help=(
        "Exit 0: no changes, 1: error, 2: changes (as terraform plan -detailed-exitcode); "
        "3, 4, 5 and 130 as without it."
    ),
)


def inventory_path(value: str | None) -> Path:
    """Absolute: ansible-runner runs from the content folder, not the caller's directory."""
    from gpufix.paths import default_inventory

    return Path(value).resolve() if value else default_inventory()


def progress(host: str, msg: str) -> None:
    """Per-host progress on stderr, only on a terminal (or when GPUFIX_PROGRESS is set)."""
    if sys.stderr.isatty() or os.environ.get("GPUFIX_PROGRESS"):
        click.echo(f"  {one_line(host)}: {one_line(msg, 2000)}", err=True)  # a host's words


def emit_json(obj: Any) -> None:
    click.echo(json.dumps(obj, indent=2, default=str))


def changes_exit(changes: bool, detailed: bool) -> int:
    """Terraform's convention: 0 on success; 2 for "changes" only under --detailed-exitcode."""
    from gpufix.errors import EXIT_CHANGES, EXIT_OK

    return EXIT_CHANGES if (detailed and changes) else EXIT_OK
