"""The test transport against the collection's: the same playbook of N tasks (command, copy,
stat, apt query) on one systemd test container, over containers.podman.podman and over
tests/connection_plugins/gpufix_podman.py (pipelined), side by side with their ratio.

    .venv/bin/python bench/transport_bench.py [--tasks 20] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import containers  # noqa: E402

NAME = "gpufix-bench-transport"
TRANSPORTS = ("containers.podman.podman", "gpufix_podman")


def playbook(tasks: int) -> str:
    kinds = [
        "      ansible.builtin.command: 'true'\n      changed_when: false\n",
        "      ansible.builtin.copy: {content: 'x\\n', dest: /tmp/gpufix-bench, mode: '0644'}\n",
        "      ansible.builtin.stat: {path: /etc/os-release}\n",
        "      ansible.builtin.command: dpkg-query -W systemd\n      changed_when: false\n",
    ]
    body = "".join(f"    - name: task {i}\n" + kinds[i % len(kinds)] for i in range(tasks))
    return f"- hosts: all\n  gather_facts: false\n  tasks:\n{body}"


def run(book: Path, inv: Path, connection: str) -> float:
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
        "ANSIBLE_CONNECTION_PLUGINS": str(ROOT / "tests" / "connection_plugins"),
        "ANSIBLE_COLLECTIONS_PATH": str(ROOT / ".ansible" / "collections"),
    }
    exe = str(Path(sys.executable).parent / "ansible-playbook")
    start = time.perf_counter()
    subprocess.run(
        [exe, "-i", str(inv), "-e", f"ansible_connection={connection}", str(book)],
        env=env,
        check=True,
        capture_output=True,
    )
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    containers.remove(NAME)
    containers.start(NAME)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            book, inv = Path(tmp) / "book.yml", Path(tmp) / "hosts.yml"
            book.write_text(playbook(args.tasks))
            inv.write_text(
                f"all:\n  hosts:\n    {NAME}:\n      ansible_python_interpreter: /usr/bin/python3\n"
            )
            best = {t: min(run(book, inv, t) for _ in range(args.rounds)) for t in TRANSPORTS}
    finally:
        containers.remove(NAME)
    base, new = (best[t] for t in TRANSPORTS)
    print(f"{platform.node()}: {os.cpu_count()} CPUs, {args.tasks} tasks, best of {args.rounds}")
    print(f"{'transport':28} {'seconds':>8} {'s/task':>7} {'ratio':>6}")
    for t in TRANSPORTS:
        print(f"{t:28} {best[t]:8.2f} {best[t] / args.tasks:7.3f} {best[t] / base:6.2f}")
    print(f"gpufix_podman / containers.podman.podman = {new / base:.2f}")


if __name__ == "__main__":
    main()
