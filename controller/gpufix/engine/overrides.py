"""NCCL settings left in the environment or nccl.conf, read as evidence (nccl_knobs.yaml).

A tuning knob from NCCL's "Debugging" section is evidence on its own; NCCL_SOCKET_IFNAME is
evidence when its exclusion list drops the interfaces NCCL's own search skips, or when it names
no interface the host has (NCCL then finds no socket interface).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpufix.engine.kb import KnowledgeBase
from gpufix.facts.host import Host
from gpufix.strategies.evidence import physical_interface

# What NCCL's own interface search skips when NCCL_SOCKET_IFNAME is unset (src/misc/socket.cc).
NCCL_DEFAULT_EXCLUDES = ("docker", "lo", "virbr")


@dataclass(frozen=True)
class Overrides:
    tuning: tuple[str, ...]  # KEY=VALUE of tuning knobs set
    ifname_filter: str | None  # the corrected NCCL_SOCKET_IFNAME when the set one drops defaults
    ifname_absent: str | None = None  # an interface the host has, when the set one names none

    def evidence(self) -> tuple[str, ...]:
        out = []
        if self.ifname_filter:
            out.append("override:ifname-filter")
        if self.ifname_absent:
            out.append("override:ifname-absent")
        if self.tuning:
            out.append("override:tuning")
        return tuple(out)


def _ifname_fix(value: str | None) -> str | None:
    """'^docker0' -> '^docker0,docker,lo,virbr' (keep the user's exclusions, add NCCL's);
    None when the value is not an exclusion list or already excludes them."""
    if not value or not value.startswith("^"):
        return None
    body = value[1:]
    exact = body.startswith("=")
    names = [n for n in (body[1:] if exact else body).split(",") if n]
    if exact:
        # "^=eth0" excludes exact names; NCCL's defaults are prefixes, which cannot be mixed in.
        return None
    missing = [d for d in NCCL_DEFAULT_EXCLUDES if not any(d.startswith(n) for n in names)]
    return "^" + ",".join([*names, *missing]) if missing else None


def _ifname_absent(value: str | None, host: Host) -> str | None:
    """An inclusion list ("eth", "=eth0") that matches none of the host's interfaces (read,
    and up; lo is on every host): the host's first physical interface, else lo. NCCL matches
    prefixes, or exact names after "=" (NCCL environment variables, NCCL_SOCKET_IFNAME)."""
    if not value or value.startswith("^") or not host.interfaces_read:
        return None
    exact = value.startswith("=")
    names = [n for n in (value[1:] if exact else value).split(",") if n]
    have = [*host.interfaces, "lo"]
    if not names or any(i == n if exact else i.startswith(n) for i in have for n in names):
        return None
    return physical_interface(host) or "lo"


def read(host: Host, kb: KnowledgeBase) -> Overrides:
    settings = host.nccl_settings
    tuning = tuple(
        f"{k.name}={settings[k.name]}"
        for k in kb.nccl_knobs
        if k.kind == "tuning" and k.name in settings
    )
    ifname = settings.get("NCCL_SOCKET_IFNAME")
    return Overrides(tuning, _ifname_fix(ifname), _ifname_absent(ifname, host))
