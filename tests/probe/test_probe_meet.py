"""The rendezvous's last step: the rank that serves the store leaves it last.

A CI run of the two-host job-env test: rank 0 (the store's host) saw "all", went on to pg_init,
failed there at once and exited; rank 1, still reading "all", got "Connection reset by peer" and
the merge blamed the second host's rendezvous. Here a real TCPStore on this machine and rank 1's
reads slowed: rank 0 must not leave before rank 1 has.
"""

from __future__ import annotations

import socket
import threading
import time
from datetime import timedelta
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

    def add(self, key: str, n: int) -> int:
        return int(self.store.add(key, n))

    def set(self, key: str, value: str) -> None:
        self.store.set(key, value)

    def wait(self, keys: list[str]) -> None:
        self.store.wait(keys)
        time.sleep(SLOW)


def test_the_store_host_leaves_the_rendezvous_last() -> None:
    prog = load_program()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    timeout = timedelta(seconds=30)
    server = dist.TCPStore("127.0.0.1", port, 2, True, timeout, wait_for_workers=False)
    client = dist.TCPStore("127.0.0.1", port, 2, False, timeout)
    left: dict[int, float] = {}

    def rank(r: int, store: Any) -> None:
        prog.meet(store, 2, r == 0)
        left[r] = time.monotonic()

    threads = [
        threading.Thread(target=rank, args=(0, server)),
        threading.Thread(target=rank, args=(1, SlowReads(client))),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sorted(left) == [0, 1], "a rank never left the rendezvous"
    assert left[0] >= left[1], f"rank 0 left {left[1] - left[0]:.2f} s before rank 1"
