"""Where NCCL_IB_DISABLE changes no transport: code that also keeps NCCL off IB for its traffic.

Two shapes, each read strictly (GPF010 leaves the IB write alone only where the other write
always runs with it):

- NCCL_SOCKET_IFNAME restricted to loopback: every rank runs on this host, and NCCL's network
  transport (IB, RoCE) carries traffic between hosts; not where the file turns both P2P and SHM
  off (then even local traffic takes the network transport).
- NCCL_NET="Socket": a communicator is given only the network that names (NCCL environment
  variables, NCCL_NET: "Forces NCCL to use a specific network"; the value "has to match exactly
  the name of the NCCL network used (case-insensitive)"; the internal ones are "IB" and
  "Socket"; strcasecmp since 2.13, src/plugin/net.cc), so no traffic takes the IB transport and
  the fallback to sockets is the NCCL_NET line's doing. (NCCL 2.13-2.27 and RCCL still
  initialise IB at start-up before comparing names, where the IB setting skips that probe.)

The covering write must be its code's only write of that variable (for NCCL_NET: every
NCCL_NET write of the file names Socket and none removes it), a literal, in the same
function (or module-level code) as the IB write and in the same block or one enclosing it (an
`if` branch, loop, `except` or `case` body counts as its own block; a `with` or `try` body does
not), with no `return`, `raise`, `break` or `continue` of that code between the IB write and a
covering write after it, and a default (`setdefault`) covers only an IB default: a forced IB
setting would outlive a launcher's own value.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence
from typing import cast

from .callsites import all_env_writes
from .project import SourceFile
from .stmts import Where

# A block: the compound statement and which of its bodies, outermost first.
_Path = tuple[tuple[int, str], ...]
# The covering write's block, whether it is a default, and its line.
_Cover = tuple[_Path, bool, int]
_JUMPS = (ast.Return, ast.Raise, ast.Break, ast.Continue)


def ib_inert(sf: SourceFile, where: Where, node: ast.AST) -> bool:
    """The NCCL_IB_DISABLE write `node` (at `where`) sits where a covering write always runs."""
    covers = cast(dict[tuple[str, ...], list[_Cover]] | None, sf.cache.get("ib-inert"))
    if covers is None:
        covers = _covers(sf)
        sf.cache["ib-inert"] = covers
    found = covers.get(where.owners)
    if not found:
        return False
    path = _paths(sf).get(id(node))
    if path is None:
        return False
    line = getattr(node, "lineno", 0)
    return any(
        path[: len(block)] == block
        and (not default or _is_setdefault(node))
        and not (cover_line > line and _jump_between(sf, path, line, cover_line))
        for block, default, cover_line in found
    )


def _jump_between(sf: SourceFile, path: _Path, start: int, end: int) -> bool:
    """A `return`, `raise`, `break` or `continue` of the same def (or module-level code) between
    the IB write and a covering write after it: the IB write can run without the other."""
    root = path[:1] if path and path[0][1] == "def" else ()
    return any(
        start < n.lineno < end and (p[:1] if p and p[0][1] == "def" else ()) == root
        for n, p in _jumps(sf)
    )


def _jumps(sf: SourceFile) -> list[tuple[ast.stmt, _Path]]:
    cached = sf.cache.get("ib-inert-jumps")
    if cached is None:
        paths = _paths(sf)
        cached = [
            (n, paths[id(n)])
            for n in (ast.walk(sf.tree) if sf.tree is not None else ())
            if isinstance(n, _JUMPS) and id(n) in paths
        ]
        sf.cache["ib-inert-jumps"] = cached
    return cast(list[tuple[ast.stmt, _Path]], cached)


def _loopback_only(value: str) -> bool:
    """An NCCL_SOCKET_IFNAME that selects the loopback interface alone (`lo`, `=lo`, `lo0`);
    a `^` list excludes interfaces instead (NCCL environment variables, NCCL_SOCKET_IFNAME)."""
    if value.startswith("^"):
        return False
    names = [v.strip().removeprefix("=") for v in value.split(",") if v.strip()]
    return bool(names) and all(n == "lo" or (n.startswith("lo") and n[2:].isdigit()) for n in names)


def _socket_net(value: str) -> bool:
    return value.lower() == "socket"  # strcasecmp against the internal name "Socket"


def _covers(sf: SourceFile) -> dict[tuple[str, ...], list[_Cover]]:
    writes = all_env_writes(sf)
    off = {
        w.key
        for w, _, _ in writes
        if w.key in ("NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE") and sf.names.const_str(w.value) == "1"
    }
    shapes: list[tuple[str, Callable[[str], bool]]] = [("NCCL_NET", _socket_net)]
    if len(off) < 2:
        shapes.append(("NCCL_SOCKET_IFNAME", _loopback_only))
    out: dict[tuple[str, ...], list[_Cover]] = {}
    for key, accept in shapes:
        mine = [(w, n, where) for w, n, where in writes if w.key == key]
        if not mine:
            continue
        if key == "NCCL_NET" and (
            _removed(sf, key)
            or not all(_socket_net(sf.names.const_str(w.value) or "") for w, _, _ in mine)
        ):
            continue  # another network named, or NCCL_NET taken out again, anywhere in the file
        scopes: dict[tuple[str, ...], list[tuple[ast.AST, str | None]]] = {}
        for w, node, where in mine:
            scopes.setdefault(where.owners, []).append((node, sf.names.const_str(w.value)))
        for owners, found in scopes.items():
            if len(found) != 1:
                continue  # set twice in that code: which one holds is not read
            node, value = found[0]
            path = _paths(sf).get(id(node))
            if value is not None and accept(value) and path is not None:
                line = getattr(node, "lineno", 0)
                out.setdefault(owners, []).append((path, _is_setdefault(node), line))
    return out


def _removed(sf: SourceFile, key: str) -> bool:
    """`del os.environ[key]` or `os.environ.pop(key)` anywhere in the file."""
    names = sf.names
    for n in ast.walk(sf.tree) if sf.tree is not None else ():
        if isinstance(n, ast.Delete):
            for t in n.targets:
                if (
                    isinstance(t, ast.Subscript)
                    and names.is_environ(t.value)
                    and names.const_str(t.slice) == key
                ):
                    return True
        elif (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and n.func.attr == "pop"
            and names.is_environ(n.func.value)
            and n.args
            and names.const_str(n.args[0]) == key
        ):
            return True
    return False


def _paths(sf: SourceFile) -> dict[int, _Path]:
    """id of every node inside a simple statement or a compound statement's header -> the
    block it runs in, counted from its def (or the module)."""
    cached = sf.cache.get("ib-inert-paths")
    if cached is None:
        found: dict[int, _Path] = {}
        if sf.tree is not None:
            _walk(sf.tree.body, (), found)
        cached = found
        sf.cache["ib-inert-paths"] = cached
    return cast(dict[int, _Path], cached)


def _walk(body: Sequence[ast.stmt], path: _Path, out: dict[int, _Path]) -> None:
    for stmt in body:
        blocks = _blocks(stmt, path)
        inner = {id(b) for _, bs in blocks for b in bs}
        todo: list[ast.AST] = [stmt]
        while todo:  # the statement's own nodes, not those of its bodies
            n = todo.pop()
            out[id(n)] = path
            todo.extend(c for c in ast.iter_child_nodes(n) if id(c) not in inner)
        for sub, stmts in blocks:
            _walk(stmts, sub, out)


def _blocks(stmt: ast.stmt, path: _Path) -> list[tuple[_Path, list[ast.stmt]]]:
    if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        # a def's body: counted from the def, as Where.owners is, and told apart from another
        # def of the same name
        return [(((id(stmt), "def"),), stmt.body)]
    if isinstance(stmt, ast.With | ast.AsyncWith):
        return [(path, stmt.body)]
    if isinstance(stmt, ast.Try | ast.TryStar):
        mark = id(stmt)
        handlers = [((*path, (mark, f"except{i}")), h.body) for i, h in enumerate(stmt.handlers)]
        other = ((*path, (mark, "else")), stmt.orelse)
        return [(path, stmt.body), *handlers, other, (path, stmt.finalbody)]
    if isinstance(stmt, ast.Match):
        return [((*path, (id(stmt), f"case{i}")), c.body) for i, c in enumerate(stmt.cases)]
    out = []
    for field in ("body", "orelse"):
        stmts = getattr(stmt, field, None)
        if isinstance(stmts, list) and stmts:
            out.append(((*path, (id(stmt), field)), stmts))
    return out


def _is_setdefault(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "setdefault"
