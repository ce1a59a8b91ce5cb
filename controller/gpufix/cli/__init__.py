"""The gpufix command line (gpufix.cli.app). This module stays small: Ctrl-C or SIGTERM while
the commands are still being imported (a third of a second) is exit 130 and one line too."""

from __future__ import annotations

import signal
import sys
from typing import Any

EXIT_INTERRUPTED = 130


def _terminate(signum: int, frame: Any) -> None:
    """SIGTERM is an interruption like Ctrl-C: the same path, the same exit code (130)."""
    raise KeyboardInterrupt("interrupted (SIGTERM)")


def _hang_up(signum: int, frame: Any) -> None:
    """SIGHUP (the SSH session dropped) goes the SIGTERM way: whoever handles SIGTERM now
    (ansible-runner during a job, which then cancels it; else _terminate) ends the run as
    interrupted, releases the locks and removes the run's temporary files."""
    import os

    os.kill(os.getpid(), signal.SIGTERM)


def main(argv: list[str] | None = None) -> None:
    """Entry point: one-line errors, stable exit codes (docs/exit-codes.md)."""
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _terminate)
    # nohup's SIG_IGN is kept: the operator asked the run to outlive the session
    if hasattr(signal, "SIGHUP") and signal.getsignal(signal.SIGHUP) is signal.SIG_DFL:
        signal.signal(signal.SIGHUP, _hang_up)
    try:
        from gpufix.cli.app import run
    except KeyboardInterrupt as exc:
        if sys.stderr is not None:
            sys.stderr.write(f"gpufix: {exc.args[0] if exc.args else 'interrupted'}\n")
        sys.exit(EXIT_INTERRUPTED)
    run(argv)
