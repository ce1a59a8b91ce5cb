"""Two orderings between ranks that a loaded machine can flip, made deterministic.

1. The rendezvous's last step: the rank that serves the store leaves it last. A CI run of the
   two-host job-env test: rank 0 (the store's host) saw "all", went on to pg_init, failed there
   at once and exited; rank 1, still reading "all", got "Connection reset by peer" and the merge
   blamed the second host's rendezvous. Here a real TCPStore and rank 1's reads slowed.
2. The supervisor's look at a rank that wrote its error and exited between two looks: it was
   counted as exiting without a word, and its message lost (a review of the tests' races).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from gpufix.probe.local import load_program

torch = pytest.importorskip("torch", reason="needs torch (CPU build is enough)")
dist = pytest.importorskip("torch.distributed")

SLOW = 1.0


class SlowReads:
    """Rank 1's view of the store: its wait comes back SLOW seconds late (a far host)."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.read_all_at: float | None = None

    def add(self, key: str, n: int) -> int:
        return int(self.store.add(key, n))

    def set(self, key: str, value: str) -> None:
        self.store.set(key, value)

    def wait(self, keys: list[str]) -> None:
        self.store.wait(keys)
        time.sleep(SLOW)
        if keys == ["all"]:
            self.read_all_at = time.monotonic()


def test_the_store_host_leaves_the_rendezvous_after_every_rank_has_read_all() -> None:
    prog = load_program()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    timeout = timedelta(seconds=30)
    server = dist.TCPStore("127.0.0.1", port, 2, True, timeout, wait_for_workers=False)
    slow = SlowReads(dist.TCPStore("127.0.0.1", port, 2, False, timeout))
    left: dict[int, float] = {}

    def rank(r: int, store: Any) -> None:
        prog.meet(store, 2, r == 0)
        left[r] = time.monotonic()

    threads = [
        threading.Thread(target=rank, args=(0, server)),
        threading.Thread(target=rank, args=(1, slow)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sorted(left) == [0, 1], "a rank never left the rendezvous"
    assert slow.read_all_at is not None
    # causal, not a race of timestamps: rank 0 returns only after rank 1's "left", which rank 1
    # adds after its read of "all" came back
    assert left[0] >= slow.read_all_at, f"rank 0 left {slow.read_all_at - left[0]:.2f} s early"


class LateLook(subprocess.Popen):  # type: ignore[type-arg]
    """A real rank process; the supervisor's first look finds it running, and it writes its
    error and exits before the next look."""

    looks = 0

    def poll(self) -> int | None:
        self.looks += 1
        if self.looks == 1:
            self.wait()
            return None
        return super().poll()


def test_a_rank_that_wrote_its_error_and_exited_between_two_looks_keeps_its_message(
    tmp_path: Path,
) -> None:
    prog = load_program()
    events = tmp_path / "rank0.events"
    line = json.dumps({"e": "error", "p": "allreduce", "t": 1.0, "msg": "boom", "tb": []})
    code = f"open({str(events)!r}, 'w').write({line!r} + '\\n'); raise SystemExit(1)"
    proc = LateLook([sys.executable, "-c", code])
    res = prog.RunResult("main", list(prog.PHASES), time.monotonic() + 60)
    res.ranks = [prog.RankState(0, proc, str(events), 0.0)]
    # the supervisor looks again on its next round (every POLL_S) and stops at the first answer
    assert any(prog.Supervisor.check_failed(None, res, 0.0) for _ in range(2))
    assert res.error == "rank 0 in allreduce: boom", res.error
