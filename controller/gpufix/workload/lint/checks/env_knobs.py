"""GPF003 / GPF004 / GPF010: debug and NCCL transport settings hard-coded in the environment.

Which variables and which values count is `gpufix.nccl_env` (shared with preflight and plan).
Only literal values (or constants) are judged: `os.environ["NCCL_DEBUG"] = level` is left alone,
and so is a write under an `if` on a switch for that very setting (`if not hparams["nccl_p2p"]`,
`if args.debug`) or on a command-line flag that is off unless passed (`if args.infer_time`,
`store_true`): the user chose it, as with a value read from the arguments. An NCCL setting
in a module whose environment cannot reach NCCL (communicators.py) is inert and left alone, and
so is NCCL_IB_DISABLE where the same code keeps NCCL off IB anyway (ibinert.py), and
TORCH_DISTRIBUTED_DEBUG written after the module imported torch, which read it (debuglevel.py).
"""

from __future__ import annotations

import ast
import re
from typing import cast

from gpufix.nccl_env import (
    DEBUG_KNOBS,
    KNOBS_BY_NAME,
    P2P_DISABLE_VAR,
    TRANSPORT_KNOBS,
    is_debug_setting,
    is_transport_workaround,
)

from ..arguments import off_unless_given
from ..callsites import all_env_writes
from ..communicators import reaches_nccl
from ..debuglevel import read_already
from ..ibinert import ib_inert
from ..project import SourceFile
from ..report import delete_statement
from ..stmts import Where
from . import Check, CheckContext

_KEYS = (*DEBUG_KNOBS, P2P_DISABLE_VAR, *TRANSPORT_KNOBS)
TRIGGERS = tuple({k.encode() for k in _KEYS} | {b"NCCL_", b"LAUNCH_BLOCKING"})


# A switch for the setting: a name, attribute or config key about NCCL transports or debugging.
# Environment look-ups (`"NCCL_P2P_LEVEL" not in os.environ`) are not switches: the write is
# then a default every run carries.
_SWITCH = re.compile(r"(?i)p2p|nccl|infiniband|(^|_)ib($|_)|shm|debug|launch_blocking")
# The words of init_process_group's parameters and of its rendezvous (torch.distributed docs,
# init_process_group; MASTER_ADDR/MASTER_PORT): `nccl_world_size` or `nccl_init_method` names the
# process group, not a switch for a transport (Zedong-Liu/ElasticMM worker.py).
_GROUP_WORDS = frozenset(
    {"world", "size", "init", "method", "rank", "store", "group", "timeout", "backend", "port",
     "addr", "master"}
)  # fmt: skip
_WORDS = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")


def _is_switch(word: str) -> bool:
    """A name about an NCCL transport or debugging; `nccl` alone beside a process-group word is
    not one."""
    if not _SWITCH.search(word):
        return False
    if _SWITCH.search(re.sub(r"(?i)nccl", " ", word)):
        return True
    return not {w.lower() for w in _WORDS.findall(word)} & _GROUP_WORDS


def _behind_switch(where: Where, sf: SourceFile) -> bool:
    names = sf.names
    for test in where.tests:
        for n in ast.walk(test):
            if isinstance(n, ast.Name):
                word = n.id
            elif isinstance(n, ast.Attribute):
                word = n.attr
            elif (
                isinstance(n, ast.Subscript)
                and isinstance(n.slice, ast.Constant)
                and not names.is_environ(n.value)
            ):
                word = str(n.slice.value)
            else:
                continue
            if _is_switch(word):
                return True
    return False


def _opt_in_bodies(sf: SourceFile) -> frozenset[int]:
    """Nodes in the body (not the `else`) of `if args.flag:` (alone or in an `and`) on a flag
    of the module's own parser that is off unless the user passes it: the user chose the
    setting for that run, like a value read from the arguments (iSphereFormer's
    `--infer_time`)."""
    cached = sf.cache.get("opt-in-bodies")
    if cached is None:
        found: set[int] = set()
        for node in ast.walk(sf.tree) if sf.tree is not None else ():
            if isinstance(node, ast.If) and _opt_in(node.test, sf):
                found.update(id(n) for stmt in node.body for n in ast.walk(stmt))
        cached = frozenset(found)
        sf.cache["opt-in-bodies"] = cached
    return cast(frozenset[int], cached)


def _opt_in(test: ast.expr, sf: SourceFile) -> bool:
    parts = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]
    return any(
        isinstance(p, ast.Attribute) and off_unless_given(sf, p.value, p.attr) for p in parts
    )


def _rule_for(key: str, value: str) -> str | None:
    if is_debug_setting(key, value):
        return "GPF003"
    if key == P2P_DISABLE_VAR and is_transport_workaround(key, value):
        return "GPF004"
    if is_transport_workaround(key, value):
        return "GPF010"
    return None


def _message(rule: str, key: str, value: str) -> str:
    note = KNOBS_BY_NAME[key].note
    if rule == "GPF003":
        return (
            f"{key}={value} hard-coded: a debugging setting ({note}); set it in the shell for "
            "a debugging run instead"
        )
    if rule == "GPF004":
        return (
            f"{key}={value} set in code: a workaround that costs GPU-to-GPU bandwidth and hides "
            "the cause (often PCIe ACS / IOMMU); fix the host instead"
        )
    return (
        f"{key}={value} set in code: {note}; a per-host workaround, not something every run "
        "should carry"
    )


def _int_literal(value: ast.expr | None) -> str | None:
    """`os.environ["NCCL_P2P_DISABLE"] = 1`: the setting meant, as the string it stands for.
    os.environ takes only strings (https://docs.python.org/3/library/os.html#os.environ), so
    the line raises TypeError: reported with the setting it tries to make."""
    if isinstance(value, ast.Constant) and type(value.value) is int:  # not a bool
        return str(value.value) if value.value.bit_length() <= 64 else None
    return None


def run(ctx: CheckContext) -> None:
    for sf in ctx.with_any(TRIGGERS):
        for w, node, where in all_env_writes(sf):
            value = sf.names.const_str(w.value)
            number = None if value is not None else _int_literal(w.value)
            value = value if number is None else number
            if w.key not in _KEYS or value is None or _behind_switch(where, sf):
                continue
            if b"add_argument" in sf.data and id(node) in _opt_in_bodies(sf):
                continue
            rule = _rule_for(w.key, value)
            if rule is None or (w.key.startswith("NCCL_") and not reaches_nccl(ctx.project, sf)):
                continue
            if w.key == "NCCL_IB_DISABLE" and ib_inert(sf, where, node):
                continue
            if w.key == "TORCH_DISTRIBUTED_DEBUG" and read_already(ctx.project, sf, node):
                continue
            stmt = node if w.statement and isinstance(node, ast.stmt) else None
            fix = delete_statement(sf, stmt, f"Delete the {w.key} line") if stmt else None
            message = _message(rule, w.key, value)
            if number is not None:
                message += (
                    f"; and os.environ takes only strings: writing {number} (an int) raises "
                    "TypeError"
                )
            ctx.reporter.add(rule, sf, w.node, message, fix=fix)


CHECK = Check(("GPF003", "GPF004", "GPF010"), run, TRIGGERS)
