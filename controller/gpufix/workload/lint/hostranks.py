"""One rank per host: code that names its rendezvous host by a literal address other than this
machine's and has no way to tell two ranks on one host apart runs one rank on each machine, so
GPU 0 is that rank's own.

PyTorch's env:// rendezvous reads MASTER_ADDR, "address of rank 0 node"
(https://pytorch.org/docs/stable/distributed.html#environment-variable-initialization); ranks
that share a host pick their GPU by a local rank (LOCAL_RANK from torchrun, mp.spawn's index),
https://pytorch.org/docs/stable/elastic/run.html. Written on Suvin-Sundararajan/cs243 (its
MASTER_ADDR is another machine's address, the rank is typed on the command line), judged FP.
The literal is only known not to be a loopback name: a node's own address in a single-host
script is taken as another machine's too, so any GPU chosen by a computed index, here or in a
module next to this one, also counts as ranks sharing a host.
"""

from __future__ import annotations

import ast
import ipaddress
import socket

from .callsites import all_env_writes, neighbours
from .names import WORDS
from .project import Project, SourceFile
from .rankcode import STARTS_PROCESSES

_LOCAL_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})
_SELECTS = frozenset({"set_device", "device", "cuda"})  # a GPU chosen by an argument


def one_rank_per_host(project: Project, sf: SourceFile) -> bool:
    cached = sf.cache.get("one-rank-per-host")
    if cached is None:
        cached = (
            b"MASTER_ADDR" in sf.data
            and _remote_master(sf)
            and not _local_ranks(sf)
            and not any(_local_ranks(n) for n in neighbours(project, sf))
        )
        sf.cache["one-rank-per-host"] = cached
    return bool(cached)


def _remote_master(sf: SourceFile) -> bool:
    """Every MASTER_ADDR the module writes is a literal, not a loopback name, and not a default
    (`setdefault`: a launcher's own value wins)."""
    if sf.tree is None:
        return False
    writes = [w for w, _, _ in all_env_writes(sf) if w.key == "MASTER_ADDR"]
    for w in writes:
        value = sf.names.const_str(w.value)
        default = isinstance(w.node, ast.Call) and getattr(w.node.func, "attr", "") == "setdefault"
        if value is None or default or _loopback(value) is not False:
            return False
    return bool(writes)


def _loopback(host: str) -> bool | None:
    """True for this machine, False for another, None for a placeholder (`$MASTER_ADDR`,
    `{master}`, `<ip>`). A port, brackets and a trailing dot are dropped."""
    host = host.strip().lower()
    if any(c in host for c in "${}<>%"):
        return None
    host = host.split("://", 1)[-1]  # tcp://host:port
    if host.startswith("["):
        host = host[1:].split("]", 1)[0]
    elif host.count(":") == 1:
        host = host.split(":", 1)[0]
    host = host.rstrip(".")
    if host in _LOCAL_NAMES or host == "":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        try:  # short IPv4 forms: "127.1", "0"
            address = ipaddress.ip_address(socket.inet_aton(host))
        except (OSError, ValueError):  # ValueError: an embedded NUL
            return False
    mapped = getattr(address, "ipv4_mapped", None)
    address = mapped or address
    return address.is_loopback or address.is_unspecified


def _local_ranks(sf: SourceFile) -> bool:
    """The module can run several ranks on one host: it starts processes, counts the host's GPUs,
    names a local rank (a variable, an attribute, an argument, a keyword, a string), or chooses
    a GPU by a computed index (`set_device(rank)`, `f"cuda:{rank}"`, `device_ids=[gpu]`)."""
    cached = sf.cache.get("local-ranks")
    if cached is None:
        cached = sf.cache["local-ranks"] = sf.tree is not None and any(
            _names_local(n) for n in ast.walk(sf.tree)
        )
    return bool(cached)


def _names_local(node: ast.AST) -> bool:
    if isinstance(node, ast.Call):
        last = _last(node.func)
        if last in STARTS_PROCESSES or last == "device_count":
            return True
        if last == "format" and _cuda_text(getattr(node.func, "value", None)):
            return any(_computed(a) for a in node.args)
        if last == "to":
            return any(_rank_named(a) for a in node.args)
        return last in _SELECTS and any(_computed(a) for a in node.args)
    if isinstance(node, ast.keyword) and node.arg == "device_ids":
        return isinstance(node.value, ast.List | ast.Tuple) and any(
            _computed(e) for e in node.value.elts
        )
    if isinstance(node, ast.keyword) and node.arg in ("device", "index"):
        return _rank_named(node.value)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Mod):
        return _cuda_text(node.left) and _computed(node.right)  # "cuda:" + str(r), "cuda:%d" % r
    if isinstance(node, ast.JoinedStr):
        text = "".join(str(v.value) for v in node.values if isinstance(v, ast.Constant))
        return "cuda:" in text and _formatted(node)
    word = _word(node)
    return word is not None and ("local_rank" in word.lower() or "localrank" in word.lower())


def _cuda_text(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and "cuda:" in str(node.value)


def _rank_named(value: ast.expr) -> bool:
    """`rank`, `args.local_rank`, `gpu`, `args.gpu_id`: a name that holds one rank's GPU."""
    for n in ast.walk(value):
        word = n.id if isinstance(n, ast.Name) else getattr(n, "attr", None)
        if isinstance(word, str) and {"rank", "gpu"} & {w.lower() for w in WORDS.findall(word)}:
            return True
    return False


def _last(func: ast.expr) -> str:
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def _computed(arg: ast.expr) -> bool:
    """An index that is not a literal (`rank`, `args.gpu`, `rank % 8`, `f"cuda:{rank}"`);
    `"cuda:0"`, `f"cuda:{0}"` and `"cuda:0" if ok else "cpu"` are written down."""
    if isinstance(arg, ast.Constant):
        return False
    if isinstance(arg, ast.JoinedStr):
        return _formatted(arg)
    if isinstance(arg, ast.IfExp):
        return _computed(arg.body) or _computed(arg.orelse)
    return not isinstance(arg, ast.Starred)


def _formatted(text: ast.JoinedStr) -> bool:
    return any(
        isinstance(v, ast.FormattedValue) and not isinstance(v.value, ast.Constant)
        for v in text.values
    )


def _word(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.arg):
        return node.arg
    if isinstance(node, ast.keyword):
        return node.arg
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None
