"""One rank per host: code that names its rendezvous host by a remote address and has no way to
tell two ranks on one host apart runs one rank on each machine, so GPU 0 is that rank's own.

PyTorch's env:// rendezvous reads MASTER_ADDR, "address of rank 0 node"
(https://pytorch.org/docs/stable/distributed.html#environment-variable-initialization); ranks
that share a host pick their GPU by a local rank (LOCAL_RANK from torchrun, mp.spawn's index),
https://pytorch.org/docs/stable/elastic/run.html. Written on Suvin-Sundararajan/cs243 (its
MASTER_ADDR is another machine's address, the rank is typed on the command line), judged FP.
"""

from __future__ import annotations

import ast
import ipaddress

from .callsites import all_env_writes, call_sites
from .project import SourceFile
from .rankcode import STARTS_PROCESSES

_LOCAL_NAMES = ("localhost", "localhost.localdomain", "")


def one_rank_per_host(sf: SourceFile) -> bool:
    cached = sf.cache.get("one-rank-per-host")
    if cached is None:
        cached = b"MASTER_ADDR" in sf.data and _remote_master(sf) and not _local_ranks(sf)
        sf.cache["one-rank-per-host"] = cached
    return bool(cached)


def _remote_master(sf: SourceFile) -> bool:
    """Every MASTER_ADDR the module writes is a literal naming another machine."""
    values = [
        sf.names.const_str(w.value) for w, _, _ in all_env_writes(sf) if w.key == "MASTER_ADDR"
    ]
    return bool(values) and all(v is not None and not _loopback(v) for v in values)


def _loopback(host: str) -> bool:
    host = host.strip().lower()
    if host in _LOCAL_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback or ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


def _local_ranks(sf: SourceFile) -> bool:
    """The module can run several ranks on one host: it starts processes, counts the host's
    GPUs, or names a local rank anywhere (a variable, an attribute, an argument, a string)."""
    for site in call_sites(sf):
        last = (site.name or "").rsplit(".", 1)[-1]
        if last in STARTS_PROCESSES or last == "device_count":
            return True
    assert sf.tree is not None
    for node in ast.walk(sf.tree):
        if isinstance(node, ast.Name):
            word = node.id
        elif isinstance(node, ast.Attribute):
            word = node.attr
        elif isinstance(node, ast.arg):
            word = node.arg
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            word = node.value
        else:
            continue
        if "local_rank" in word.lower() or "localrank" in word.lower():
            return True
    return False
