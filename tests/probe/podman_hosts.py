"""Container "hosts" for the multi-node probe: podman containers on two podman networks this test
creates, torch (CPU build) bind-mounted read-only, an inventory Ansible reaches them through, and
firewall rules put into one container's network namespace from outside (the host's iptables
through nsenter: the image has no iptables, and the container needs no extra privilege).

The image is localhost/gpufix-bookworm:1 (Debian 12 userland, python3, no `ip` command: its facts
list interfaces without addresses, so the first host's address comes from the inventory). Names
start with the branch name, `probe-mn-`, and everything is removed at the end.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import yaml

IMAGE = "localhost/gpufix-bookworm:1"
TORCH_VERSION = "2.13.0"
# --dns=none: no resolver to wait for. With podman's default resolv.conf, torch's TCPStore
# client spends 10 s on a reverse lookup of its own address (EAI_AGAIN) before it counts as
# connected, longer than the tests' 8 s phase deadline.
RUN = [
    "podman", "run", "-d", "--runtime=runc", "--tmpfs=/tmp:rw", "--dns=none",
    "--ulimit=nofile=16384:16384", "--ulimit=nproc=16384:16384",
]  # fmt: skip


def torch_dir() -> Path:
    """torch for the containers' Python 3.11, installed once (as tests/e2e does)."""
    base = Path(os.environ.get("GPUFIX_E2E_TORCH", "/var/tmp/gpufix-e2e-torch"))
    if not (base / "torch" / "__init__.py").is_file():
        pip = [sys.executable, "-m", "pip", "install", "--quiet", "--target", str(base)]
        subprocess.run([*pip, f"torch=={TORCH_VERSION}"], check=True, timeout=900)
    return base


def sh(*cmd: str, check: bool = True) -> str:
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if check and r.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr[-800:]}")
    return r.stdout


@dataclass
class Hosts:
    prefix: str
    names: list[str]  # inventory names h1, h2, ...
    nets: list[str]  # podman networks, in the order each container joins them
    addr: dict[str, dict[str, str]] = field(default_factory=dict)  # host -> network -> IPv4
    ifname: dict[str, dict[str, str]] = field(default_factory=dict)  # host -> network -> eth#

    def container(self, host: str) -> str:
        return f"{self.prefix}-{host}"

    def start(self, torch: Path) -> None:
        for net in self.nets:
            sh("podman", "network", "create", net)
        # Fixed interface names (mn0, mn1): podman numbers eth0, eth1 in no fixed order.
        nets = [
            a for i, n in enumerate(self.nets) for a in ("--network", f"{n}:interface_name=mn{i}")
        ]
        for h in self.names:
            sh(
                *RUN,
                "--name", self.container(h), "--hostname", h,
                *nets,
                "-v", f"{torch}:/opt/gpufix-torch:ro",
                IMAGE, "sleep", "infinity",
            )  # fmt: skip
            self._learn(h)

    def _learn(self, host: str) -> None:
        """Each network's address and interface name inside the container (matched by MAC)."""
        out = sh(
            "podman", "inspect", "-f", "{{json .NetworkSettings.Networks}}", self.container(host)
        )
        nets = json.loads(out)
        macs = sh(
            "podman", "exec", self.container(host), "sh", "-c",
            "for i in /sys/class/net/*; do echo ${i##*/} $(cat $i/address); done",
        )  # fmt: skip
        by_mac = {mac: name for name, mac in (ln.split() for ln in macs.splitlines() if ln)}
        self.addr[host] = {n: nets[n]["IPAddress"] for n in self.nets}
        self.ifname[host] = {n: by_mac[nets[n]["MacAddress"]] for n in self.nets}

    def inventory(self, path: Path, **group_vars: object) -> Path:
        first = self.names[0]
        hosts = {h: {"ansible_host": self.container(h)} for h in self.names}
        hosts[first]["gpufix_probe_master_addr"] = self.addr[first][self.nets[0]]
        inv = {
            "all": {
                "children": {"pair": {"hosts": hosts}},
                "vars": {
                    "ansible_connection": "containers.podman.podman",
                    "ansible_python_interpreter": "/usr/bin/python3",
                    "ansible_become": False,  # root already; the image has no sudo
                    "gpufix_probe_pythonpath": "/opt/gpufix-torch",
                    **group_vars,
                },
            }
        }
        path.write_text(yaml.safe_dump(inv, sort_keys=False))
        return path

    def firewall(self, host: str, *rule: str) -> None:
        """Add an iptables rule in the container's network namespace."""
        pid = sh("podman", "inspect", "-f", "{{.State.Pid}}", self.container(host)).strip()
        sh("nsenter", "-t", pid, "-n", "iptables", *rule)

    def flush(self, host: str) -> None:
        pid = sh("podman", "inspect", "-f", "{{.State.Pid}}", self.container(host)).strip()
        sh("nsenter", "-t", pid, "-n", "iptables", "-F", "INPUT")

    def remove(self) -> None:
        for h in self.names:
            sh("podman", "rm", "-f", "-t", "0", self.container(h), check=False)
        for net in self.nets:
            sh("podman", "network", "rm", "-f", net, check=False)


def new_hosts(n: int = 2) -> Hosts:
    prefix = f"probe-mn-{uuid.uuid4().hex[:8]}"
    return Hosts(prefix, [f"h{i + 1}" for i in range(n)], [f"{prefix}-a", f"{prefix}-b"])
