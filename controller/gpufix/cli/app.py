"""The gpufix command line: parse, call, print. Exit codes: docs/exit-codes.md.

Every subcommand is registered here explicitly: an import error is a bug that must show, not a
command that silently disappears. `gpufix.cli.main` imports this module once its signal
handling is in place.
"""

from __future__ import annotations

import errno
import os
import sys

import click

from gpufix import __version__
from gpufix.cli import EXIT_INTERRUPTED
from gpufix.cli.apply import apply_cmd, rollback_cmd, status_cmd, uninstall_cmd
from gpufix.cli.hosts import diff, facts, plan, probe
from gpufix.cli.tools import lint_cmd, preflight_cmd
from gpufix.errors import EXIT_ERROR, EXIT_INVALID, EXIT_OK, GpufixError
from gpufix.inputs import one_line

ERROR_LIMIT = 4000  # an error line is cut only where a host's message would flood it


def _version_line() -> str:
    """The version, and where the Ansible content (roles, playbooks, the example inventory)
    is read from: a wheel keeps it inside the installed package."""
    from gpufix.paths import content_root

    try:
        where = str(content_root())
    except GpufixError as exc:
        where = str(exc)
    return f"gpufix, version {__version__}\ncontent: {where}"


def _show_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(_version_line())
        ctx.exit()


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_show_version,
    help="Show the version and where gpufix's content (roles, playbooks, example inventory) is.",
)
def main_group() -> None:
    """Diagnose and fix multi-GPU PyTorch start-up hangs on Linux GPU hosts."""


for _name, _cmd in (
    ("facts", facts),
    ("plan", plan),
    ("diff", diff),
    ("probe", probe),
    ("apply", apply_cmd),
    ("status", status_cmd),
    ("rollback", rollback_cmd),
    ("uninstall", uninstall_cmd),
    ("lint", lint_cmd),
    ("preflight", preflight_cmd),
):
    main_group.add_command(_cmd, _name)


def run(argv: list[str] | None = None) -> None:
    """One-line errors, stable exit codes, no tracebacks for user errors."""
    args = list(sys.argv[1:] if argv is None else argv)
    # lint and preflight name themselves in every error (docs/exit-codes.md)
    sub = next((a for a in args if not a.startswith("-")), "")
    who = f"gpufix {sub}" if sub in ("lint", "preflight") else "gpufix"
    if sys.stdout is None or sys.stderr is None:
        # a closed descriptor 1 or 2 would be handed to the next file opened (a lock, a
        # journal), and output written there
        if sys.stderr is not None:
            click.echo(f"{who}: error: standard output is closed", err=True)
        sys.exit(EXIT_ERROR)
    try:
        # make_context + invoke, not main(): click's main() prints an empty line on Ctrl-C
        # before its Abort, and the interruption is one line here (docs/exit-codes.md)
        with main_group.make_context("gpufix", args) as ctx:
            rv = main_group.invoke(ctx)
        sys.stdout.flush()  # a full disk or a closed pipe shows here, not at exit
    except BrokenPipeError:
        # the reader went away (`| head`): no message; exit 1 as Python's docs advise
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(EXIT_ERROR)
    except OSError as exc:
        if exc.errno not in _OUTPUT_ERRNOS:
            raise _internal(exc) from None
        where = f": {exc.filename}" if exc.filename else ""
        click.echo(f"{who}: error: {exc.strerror}{where}", err=True)
        sys.exit(EXIT_ERROR)
    except GpufixError as exc:
        # one line, and what a host or a file put in it shown escaped, never sent to the terminal
        click.echo(f"{who}: error: {one_line(str(exc), ERROR_LIMIT)}", err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.UsageError as exc:
        if type(exc).__name__ == "NoArgsIsHelpError" and exc.ctx:
            # `gpufix` alone asks for the help (click >= 8.2 raises this; older click printed
            # the help and exited 0 itself): the help, no error
            click.echo(exc.ctx.get_help())
            sys.exit(EXIT_OK)
        msg = exc.format_message()
        hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx else ""
        path = exc.ctx.command_path if exc.ctx else ""
        named = path if path in ("gpufix lint", "gpufix preflight") else "gpufix"
        click.echo(f"{named}: error: {msg}{hint}", err=True)
        sys.exit(EXIT_INVALID)
    except click.Abort as exc:
        # click turns KeyboardInterrupt into Abort; keep what the interrupted command said
        cause = exc.__cause__
        said = cause.args[0] if isinstance(cause, KeyboardInterrupt) and cause.args else None
        click.echo(f"gpufix: {said or 'interrupted'}", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except KeyboardInterrupt as exc:
        # apply's journal says where each host stands; the message says how to resume
        click.echo(f"gpufix: {exc.args[0] if exc.args else 'interrupted'}", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except click.ClickException as exc:
        click.echo(f"gpufix: error: {exc.format_message()}", err=True)
        sys.exit(EXIT_INVALID)
    except Exception as exc:  # a bug: one line, traceback only when asked
        raise _internal(exc) from None
    sys.exit(rv if isinstance(rv, int) else EXIT_OK)


# Writing failed for want of room or a device, not for a bug: a one-line error.
_OUTPUT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS, errno.EPIPE})


def _internal(exc: Exception) -> SystemExit:
    """A bug: one line and exit 1; the traceback only with GPUFIX_DEBUG set."""
    if os.environ.get("GPUFIX_DEBUG"):
        raise exc
    from gpufix.inputs import one_line

    click.echo(
        f"gpufix: internal error: {type(exc).__name__}: {one_line(str(exc), 600)} "
        "(GPUFIX_DEBUG=1 shows the traceback)",
        err=True,
    )
    return SystemExit(EXIT_ERROR)
