"""What a multi-node probe needs from the hosts' facts: the rendezvous address, the interfaces
worth an `ifname-*` experiment, InfiniBand, the GPU names, and whether the hosts are containers
on private networks. Pure functions of facts (gpufix facts schema) and inventory variables."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping, Sequence
from typing import Any

from gpufix.errors import InvalidInput

# As the probe program accepts them (IFNAME_RE, HOST_RE in gpufix_probe.py).
_IFNAME = re.compile(r"^[A-Za-z0-9_.:-]{1,15}$")
_HOST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.:-]{0,252}$")
# Interfaces no rank should use between hosts.
_NOT_BETWEEN_HOSTS = re.compile(r"^(lo|docker\d*|virbr\d*|cni-podman\d*|podman\d*|veth.*)$")


def _interfaces(facts: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    net = facts.get("network")
    if not isinstance(net, Mapping) or "unknown" in net:
        return []
    return [i for i in net.get("interfaces") or [] if isinstance(i, Mapping)]


def _ipv4(iface: Mapping[str, Any]) -> list[str]:
    """Addresses without their prefix length ("10.0.0.5/24" -> "10.0.0.5"); none when unknown."""
    out = []
    for cidr in iface.get("ipv4") or []:
        try:
            out.append(str(ipaddress.ip_interface(str(cidr)).ip))
        except ValueError:
            continue
    return out


def usable(iface: Mapping[str, Any]) -> bool:
    name = str(iface.get("name", ""))
    up = iface.get("up") is not False  # unknown counts as up
    return up and bool(_IFNAME.fullmatch(name)) and not _NOT_BETWEEN_HOSTS.match(name)


def master_addr(
    first: str, host_vars: Mapping[str, Any], facts: Mapping[str, Any] | None, ifname: str | None
) -> str:
    """The first host's address as the others reach it.

    In order: gpufix_probe_master_addr in the inventory; the IPv4 of `ifname` (or of the first
    usable interface) in the first host's facts; ansible_host when it is an IP address.
    """
    given = host_vars.get("gpufix_probe_master_addr")
    if given:
        if not _HOST.fullmatch(str(given)):
            raise InvalidInput(f"{first}: gpufix_probe_master_addr {given!r} is not an address")
        return str(given)
    for iface in _interfaces(facts or {}):
        if (iface.get("name") == ifname if ifname else usable(iface)) and _ipv4(iface):
            return _ipv4(iface)[0]
    host = str(host_vars.get("ansible_host") or "")
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    raise InvalidInput(
        f"cannot tell {first}'s address for the rendezvous: its facts list no IPv4 address "
        "(no `ip` command there?) and ansible_host is not an IP; set gpufix_probe_master_addr "
        "for it in the inventory or pass --master-addr"
    )


def ifname_candidates(facts: Sequence[Mapping[str, Any]], current: str | None) -> list[str]:
    """Interfaces every host has up (by name), except loopback, bridges and the current one."""
    names: set[str] | None = None
    for f in facts:
        mine = {str(i["name"]) for i in _interfaces(f) if usable(i)}
        names = mine if names is None else names & mine
    return sorted(n for n in names or set() if n != current)


def has_infiniband(facts: Sequence[Mapping[str, Any]]) -> bool:
    for f in facts:
        net = f.get("network")
        if isinstance(net, Mapping) and net.get("infiniband"):
            return True
    return False


def gpu_names(facts: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every host's GPU names as nvidia-smi gives them; none for a host whose GPUs are unknown."""
    names = []
    for f in facts:
        gpus = f.get("gpus")
        for g in gpus if isinstance(gpus, list) else []:
            if isinstance(g, Mapping) and isinstance(g.get("name"), str):
                names.append(g["name"])
    return names


def private_container_network(facts: Sequence[Mapping[str, Any]]) -> bool:
    """Some host is a container on its own network namespace (not --network=host)."""
    for f in facts:
        c = f.get("containers")
        if isinstance(c, Mapping) and c.get("in_container") is True and c.get("net_host") is False:
            return True
    return False
