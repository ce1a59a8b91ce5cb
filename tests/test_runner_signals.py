"""Ctrl-C (or SIGTERM) during an ansible-runner job always ends the call with
KeyboardInterrupt, so apply starts nothing after it: also when the signal comes after the job's
own loop has ended, where ansible-runner's handler only sets a flag it no longer reads and the
job reads "successful" (a review, 2026-12-06, L4: the next step, a reboot, went ahead)."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import ansible_runner
import pytest
from ansible_runner.utils import signal_handler
from gpufix import runner


def _job_that_ends_then_sees(sig: signal.Signals | None) -> Any:
    """ansible_runner.run as its interface behaves: the caller's cancel_callback, else its own
    signal handlers; the loop polls it, then the job ends; `sig` arrives after that."""

    def run(**kwargs: Any) -> SimpleNamespace:
        cancelled = kwargs.get("cancel_callback") or signal_handler()
        assert cancelled is not None and not cancelled()  # the loop's last poll
        if sig is not None:
            os.kill(os.getpid(), sig)
        return SimpleNamespace(status="successful", rc=0)

    return run


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_after_the_jobs_loop_is_not_lost(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, sig: signal.Signals
) -> None:
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    monkeypatch.setattr(ansible_runner, "run", _job_that_ends_then_sees(sig))
    with pytest.raises(KeyboardInterrupt):
        runner.run_playbook("uninstall.yml", tmp_path / "inv.yml", limit="h1")
    assert {s: signal.getsignal(s) for s in before} == before  # put back


def test_no_signal_no_interrupt(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(ansible_runner, "run", _job_that_ends_then_sees(None))
    got = runner.run_playbook("uninstall.yml", tmp_path / "inv.yml", limit="h1")
    assert got.status == "successful"
