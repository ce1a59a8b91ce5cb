"""`gpufix lint`: static checks for self-inflicted multi-GPU start-up problems in training code.

The main rule (GPF001) finds CUDA device-selection variables set after torch (or a library that
loads it) was imported, in execution order. Everything is read from the AST, never run; a rule
reports only what it is certain of, so an unclear case is left alone rather than guessed.
"""

from __future__ import annotations

import ast
import json
import os
import re
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO
from urllib.parse import quote

from gpufix import __version__, inputs
from gpufix.errors import EXIT_INVALID, EXIT_OK, GpufixError, InvalidInput

# Linters' convention (ruff, flake8): 1 when there are findings.
EXIT_FINDINGS = 1

FORMATS = ("text", "json", "sarif")
SARIF_SCHEMA = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)


@dataclass(frozen=True)
class Rule:
    id: str
    name: str
    level: str  # SARIF level: error | warning | note
    summary: str
    doc: str


RULES: tuple[Rule, ...] = (
    Rule(
        "GPF001",
        "cuda-env-after-torch-import",
        "error",
        "CUDA device-selection variable set after torch was imported",
        "CUDA reads CUDA_VISIBLE_DEVICES / CUDA_DEVICE_ORDER once, when it initialises; after "
        "torch is imported any library may initialise it, after which the assignment does "
        "nothing. Set it before the first torch-based import, or in the launcher's environment.",
    ),
    Rule(
        "GPF002",
        "data-parallel",
        "warning",
        "torch.nn.DataParallel used",
        "DataParallel runs one process with a thread per GPU and scales poorly (worse past 8 "
        "GPUs); PyTorch recommends DistributedDataParallel, one process per GPU.",
    ),
    Rule(
        "GPF003",
        "debug-knob-in-code",
        "warning",
        "NCCL / torch.distributed debug setting hard-coded in training code",
        "NCCL_DEBUG=INFO/TRACE, NCCL_DEBUG_SUBSYS and TORCH_DISTRIBUTED_DEBUG=DETAIL are for "
        "a debugging session; set them in the shell for that run, not in the code that ships.",
    ),
    Rule(
        "GPF004",
        "nccl-p2p-disabled-in-code",
        "warning",
        "NCCL_P2P_DISABLE set in training code",
        "Disabling peer-to-peer makes NCCL copy through host memory: it costs bandwidth and hides "
        "the cause of a P2P hang (usually PCIe ACS / IOMMU); fix the host (gpufix plan) instead.",
    ),
    Rule(
        "GPF900",
        "parse-error",
        "error",
        "file could not be parsed; it was not checked",
        "A syntax error, an undecodable byte or nesting too deep for Python's parser.",
    ),
)
RULES_BY_ID: Mapping[str, Rule] = {r.id: r for r in RULES}

# Top-level packages whose import loads torch (so CUDA may be initialised from then on).
TORCH_LIBRARIES: frozenset[str] = frozenset(
    {
        "torch",
        "torchvision",
        "torchaudio",
        "torchtext",
        "transformers",
        "accelerate",
        "deepspeed",
        "lightning",
        "pytorch_lightning",
        "lightning_fabric",
        "peft",
        "trl",
        "diffusers",
        "timm",
        "sentence_transformers",
        "bitsandbytes",
        "fairscale",
        "apex",
        "xformers",
        "flash_attn",
        "torchmetrics",
        "colossalai",
        "megatron",
        "vllm",
    }
)

# Read by the CUDA driver once, at initialisation (CUDA C Programming Guide, "CUDA Environment
# Variables").
CUDA_INIT_VARS: frozenset[str] = frozenset({"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"})

# Debug settings: variable -> values that mean "debugging" (None: any value).
# NCCL: docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html (NCCL_DEBUG, NCCL_DEBUG_SUBSYS);
# torch: pytorch.org/docs/stable/distributed.html (TORCH_DISTRIBUTED_DEBUG=DETAIL costs speed).
DEBUG_KNOBS: Mapping[str, frozenset[str] | None] = {
    "NCCL_DEBUG": frozenset({"INFO", "TRACE"}),
    "NCCL_DEBUG_SUBSYS": None,
    "TORCH_DISTRIBUTED_DEBUG": frozenset({"DETAIL"}),
}
P2P_DISABLE_VAR = "NCCL_P2P_DISABLE"

DATA_PARALLEL: frozenset[str] = frozenset(
    {
        "torch.nn.DataParallel",
        "torch.nn.parallel.DataParallel",
        "torch.nn.parallel.data_parallel.DataParallel",
        "torch.nn.parallel.data_parallel",
        "torch.nn.parallel.data_parallel.data_parallel",
    }
)

# Byte strings a file must contain for any rule to fire (every rule needs a literal name).
_TRIGGERS: tuple[bytes, ...] = tuple(
    k.encode()
    for k in (*CUDA_INIT_VARS, *DEBUG_KNOBS, P2P_DISABLE_VAR, "DataParallel", "data_parallel")
)

_NOQA = re.compile(r"#\s*noqa(?P<colon>:\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?", re.I)
_SKIP_DIRS = frozenset({"__pycache__", "node_modules"})


@dataclass(frozen=True)
class Related:
    path: str
    line: int
    col: int  # 1-based, in characters
    message: str


@dataclass(frozen=True)
class Finding:
    rule: str
    path: str
    line: int
    col: int  # 1-based, in characters
    end_line: int
    end_col: int
    message: str
    related: tuple[Related, ...] = ()

    @property
    def level(self) -> str:
        return RULES_BY_ID[self.rule].level

    def to_dict(self) -> dict[str, object]:
        return {
            "rule": self.rule,
            "level": self.level,
            "path": self.path,
            "line": self.line,
            "col": self.col,
            "end_line": self.end_line,
            "end_col": self.end_col,
            "message": self.message,
            "related": [r.__dict__ for r in self.related],
            "doc": RULES_BY_ID[self.rule].doc,
        }


@dataclass(frozen=True)
class LintResult:
    files: int
    findings: tuple[Finding, ...]

    @property
    def exit_code(self) -> int:
        return EXIT_FINDINGS if self.findings else EXIT_OK


# ---------------------------------------------------------------------------------- analysis


@dataclass(frozen=True)
class _Import:
    """A torch-based import that has run on every path to the current statement."""

    text: str  # "import torch", "from transformers import ..."
    line: int
    col_offset: int
    via: str = ""  # "setup() called at line 12"


@dataclass(frozen=True)
class _EnvSet:
    key: str
    value: ast.expr | None
    node: ast.AST  # where to report


_State = dict[str, _Import]  # top-level package -> first import; insertion = execution order


def _merge(states: Iterable[_State | None]) -> _State | None:
    """Imports certain on every path that falls through; None when no path does."""
    live = [s for s in states if s is not None]
    if not live:
        return None
    first = live[0]
    return {k: v for k, v in first.items() if all(k in s for s in live[1:])}


def _const_str(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _catches_only_import_errors(handler: ast.ExceptHandler) -> bool:
    names = {"ImportError", "ModuleNotFoundError"}
    t = handler.type
    if isinstance(t, ast.Name):
        return t.id in names
    if isinstance(t, ast.Tuple):
        return bool(t.elts) and all(isinstance(e, ast.Name) and e.id in names for e in t.elts)
    return False


def _walk_no_scopes(node: ast.AST) -> Iterator[ast.AST]:
    """ast.walk that does not enter code which does not run here (lambdas, nested defs)."""
    todo = [node]
    while todo:
        n = todo.pop()
        yield n
        for child in ast.iter_child_nodes(n):
            if not isinstance(child, ast.Lambda | ast.FunctionDef | ast.AsyncFunctionDef):
                todo.append(child)


def _header_exprs(stmt: ast.stmt) -> list[ast.AST]:
    """The expressions a compound statement evaluates itself (not its body)."""
    if isinstance(stmt, ast.If | ast.While):
        return [stmt.test]
    if isinstance(stmt, ast.For | ast.AsyncFor):
        return [stmt.iter]
    if isinstance(stmt, ast.With | ast.AsyncWith):
        return [i.context_expr for i in stmt.items]
    if isinstance(stmt, ast.Match):
        return [stmt.subject]
    return []


class _Checker:
    def __init__(self, path: str, tree: ast.Module, source: str) -> None:
        self.path = path
        self.tree = tree
        self.lines = source.splitlines()
        self.os_names: set[str] = set()
        self.environ_names: set[str] = set()
        self.putenv_names: set[str] = set()
        self.qualified: dict[str, str] = {}
        self.funcs: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        self.active: list[str] = []  # call stack of functions being followed
        self.findings: dict[tuple[str, int, int], Finding] = {}

    # -- names ----------------------------------------------------------------------------
    def _bind_names(self) -> None:
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        self.qualified[a.asname] = a.name
                        if a.name == "os":
                            self.os_names.add(a.asname)
                    else:
                        top = a.name.split(".")[0]
                        self.qualified[top] = top
                        if top == "os":
                            self.os_names.add("os")
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for a in node.names:
                    bound = a.asname or a.name
                    self.qualified[bound] = f"{node.module}.{a.name}"
                    if node.module == "os" and a.name == "environ":
                        self.environ_names.add(bound)
                    if node.module == "os" and a.name == "putenv":
                        self.putenv_names.add(bound)

    def _resolve(self, node: ast.AST) -> str | None:
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name) or node.id not in self.qualified:
            return None
        return ".".join([self.qualified[node.id], *reversed(parts)])

    def _is_environ(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Name):
            return node.id in self.environ_names
        return (
            isinstance(node, ast.Attribute)
            and node.attr == "environ"
            and isinstance(node.value, ast.Name)
            and node.value.id in self.os_names
        )

    # -- environment writes ---------------------------------------------------------------
    def _dict_sets(self, d: ast.AST, where: ast.AST) -> list[_EnvSet]:
        out = []
        if isinstance(d, ast.Dict):
            for k, v in zip(d.keys, d.values, strict=True):
                key = _const_str(k)
                if key is not None:
                    out.append(_EnvSet(key, v, where))
        elif isinstance(d, ast.Call) and isinstance(d.func, ast.Name) and d.func.id == "dict":
            out.extend(_EnvSet(kw.arg, kw.value, where) for kw in d.keywords if kw.arg)
        return out

    def _env_sets(self, node: ast.AST) -> list[_EnvSet]:
        """Environment writes with a literal key made by this node itself."""
        out: list[_EnvSet] = []
        if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for t in ast.walk(target):
                    if isinstance(t, ast.Subscript) and self._is_environ(t.value):
                        key = _const_str(t.slice)
                        if key is not None:
                            value = node.value if isinstance(target, ast.Subscript) else None
                            out.append(_EnvSet(key, value, t))
            if (
                isinstance(node, ast.AugAssign)
                and isinstance(node.op, ast.BitOr)
                and self._is_environ(node.target)
            ):
                out.extend(self._dict_sets(node.value, node))
        elif isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Attribute) and self._is_environ(f.value):
                if f.attr in ("setdefault", "__setitem__") and node.args:
                    key = _const_str(node.args[0])
                    if key is not None:
                        value = node.args[1] if len(node.args) > 1 else None
                        out.append(_EnvSet(key, value, node))
                elif f.attr == "update":
                    if node.args:
                        out.extend(self._dict_sets(node.args[0], node))
                    out.extend(_EnvSet(kw.arg, kw.value, node) for kw in node.keywords if kw.arg)
            elif (
                isinstance(f, ast.Attribute)
                and f.attr == "putenv"
                and isinstance(f.value, ast.Name)
                and f.value.id in self.os_names
            ) or (isinstance(f, ast.Name) and f.id in self.putenv_names):
                key = _const_str(node.args[0]) if node.args else None
                if key is not None:
                    out.append(_EnvSet(key, node.args[1] if len(node.args) > 1 else None, node))
        return out

    def _sets_in(self, roots: Iterable[ast.AST]) -> list[_EnvSet]:
        return [s for root in roots for n in _walk_no_scopes(root) for s in self._env_sets(n)]

    # -- reporting --------------------------------------------------------------------------
    def _col(self, line: int, col_offset: int) -> int:
        """ast column offsets count UTF-8 bytes; report characters, 1-based."""
        if 0 < line <= len(self.lines):
            text = self.lines[line - 1]
            return len(text.encode("utf-8")[:col_offset].decode("utf-8", "replace")) + 1
        return col_offset + 1

    def _add(
        self, rule: str, node: ast.AST, message: str, related: tuple[Related, ...] = ()
    ) -> None:
        line = getattr(node, "lineno", 1)
        col_offset = getattr(node, "col_offset", 0)
        end_line = getattr(node, "end_lineno", None) or line
        end_offset = getattr(node, "end_col_offset", None)
        end_col = (
            self._col(end_line, end_offset)
            if end_offset is not None
            else self._col(line, col_offset)
        )
        key = (rule, line, col_offset)
        if key not in self.findings:
            self.findings[key] = Finding(
                rule,
                self.path,
                line,
                self._col(line, col_offset),
                end_line,
                end_col,
                message,
                related,
            )

    # -- GPF001: execution order ----------------------------------------------------------
    def _imports_of(self, stmt: ast.stmt) -> list[tuple[str, str]]:
        if isinstance(stmt, ast.Import):
            return [
                (a.name.split(".")[0], f"import {a.name}")
                for a in stmt.names
                if a.name.split(".")[0] in TORCH_LIBRARIES
            ]
        if isinstance(stmt, ast.ImportFrom) and stmt.module and not stmt.level:
            top = stmt.module.split(".")[0]
            if top in TORCH_LIBRARIES:
                return [(top, f"from {stmt.module} import ...")]
        return []

    def _check_sets(self, sets: Sequence[_EnvSet], state: _State) -> None:
        if not state:
            return
        first = next(iter(state.values()))
        for s in sets:
            if s.key not in CUDA_INIT_VARS:
                continue
            via = f", in {first.via}" if first.via else ""
            msg = (
                f"{s.key} set after `{first.text}` (line {first.line}{via}): CUDA ignores it "
                "once initialised, which torch code may do from that import on (torch's device "
                "count may then disagree with the devices in use); set it before the first torch "
                "import or in the launch environment"
            )
            related = Related(
                self.path,
                first.line,
                self._col(first.line, first.col_offset),
                f"`{first.text}`: the first torch-based import{via}",
            )
            self._add("GPF001", s.node, msg, (related,))

    def _follow_calls(self, roots: Iterable[ast.AST], state: _State) -> _State:
        """Run module-level functions called here, in the order Python evaluates them."""
        calls = [
            n
            for root in roots
            for n in _walk_no_scopes(root)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in self.funcs
        ]
        calls.sort(key=lambda c: (getattr(c, "end_lineno", 0), getattr(c, "end_col_offset", 0)))
        for call in calls:
            assert isinstance(call.func, ast.Name)
            name = call.func.id
            if name in self.active:  # recursion: its effect is already being counted
                continue
            self.active.append(name)
            try:
                after = self._function(
                    self.funcs[name], state, f"{name}() called at line {call.lineno}"
                )
            finally:
                self.active.pop()
            state = after
        return state

    def _function(
        self, fn: ast.FunctionDef | ast.AsyncFunctionDef, state: _State, via: str
    ) -> _State:
        """The imports certain after the call returns (early returns taken into account)."""
        returns: list[_State | None] = []
        end = self._block(fn.body, dict(state), via, returns, module=False)
        merged = _merge([*returns, end])
        # A call that can only raise does not return; keep the caller's state.
        return merged if merged is not None else state

    def _block(
        self,
        body: Sequence[ast.stmt],
        state: _State,
        via: str,
        returns: list[_State | None],
        module: bool,
    ) -> _State | None:
        """Walk statements in order; returns the state at fall-through, None if it never does."""
        for stmt in body:
            next_state = self._stmt(stmt, state, via, returns, module)
            if next_state is None:
                return None
            state = next_state
        return state

    def _stmt(
        self, stmt: ast.stmt, state: _State, via: str, returns: list[_State | None], module: bool
    ) -> _State | None:
        walk = self._block
        headers = _header_exprs(stmt)
        if headers:
            self._check_sets(self._sets_in(headers), state)
            state = self._follow_calls(headers, state)

        if isinstance(stmt, ast.Import | ast.ImportFrom):
            for top, text in self._imports_of(stmt):
                if top not in state:
                    state = {**state, top: _Import(text, stmt.lineno, stmt.col_offset, via)}
            return state
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            if module:
                self.funcs[stmt.name] = stmt
            return state
        if isinstance(stmt, ast.ClassDef):
            return walk(stmt.body, dict(state), via, returns, module=False)
        if isinstance(stmt, ast.If):
            a = walk(stmt.body, dict(state), via, returns, module)
            b = walk(stmt.orelse, dict(state), via, returns, module)
            return _merge([a, b])
        if isinstance(stmt, ast.For | ast.AsyncFor | ast.While):
            # The body may run zero times: what it imports is not certain afterwards.
            walk(stmt.body, dict(state), via, returns, module)
            walk(stmt.orelse, dict(state), via, returns, module)
            return state
        if isinstance(stmt, ast.With | ast.AsyncWith):
            return walk(stmt.body, state, via, returns, module)
        if isinstance(stmt, ast.Try | ast.TryStar):
            body = walk(stmt.body, dict(state), via, returns, module)
            after = (
                walk(stmt.orelse, dict(body), via, returns, module) if body is not None else None
            )
            handled = [walk(h.body, dict(state), via, returns, module) for h in stmt.handlers]
            if not all(_catches_only_import_errors(h) for h in stmt.handlers):
                after = _merge([after, *handled])
            elif after is None:
                # A handler for a failed import: nothing was loaded on that path.
                after = _merge(handled)
            if stmt.finalbody:
                base = after if after is not None else dict(state)
                final = walk(stmt.finalbody, dict(base), via, returns, module)
                return final if after is not None else None
            return after
        if isinstance(stmt, ast.Match):
            for case in stmt.cases:
                walk(case.body, dict(state), via, returns, module)
            return state
        if isinstance(stmt, ast.Return):
            if stmt.value is not None:
                self._check_sets(self._sets_in([stmt.value]), state)
                state = self._follow_calls([stmt.value], state)
            returns.append(state)
            return None
        if isinstance(stmt, ast.Raise | ast.Break | ast.Continue):
            return None
        # A simple statement: writes are checked against the state before its calls run, so a
        # write in the same statement as a call that imports torch is never flagged.
        self._check_sets(self._sets_in([stmt]), state)
        return self._follow_calls([stmt], state)

    # -- flow-insensitive rules -------------------------------------------------------------
    def _flag_late_cuda_vars(self) -> None:
        self._block(self.tree.body, {}, "", [], module=True)
        # Inside any function, in its own order, whether or not anything calls it.
        for fn in ast.walk(self.tree):
            if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                self.active = [fn.name]
                self._block(fn.body, {}, "", [], module=False)
        self.active = []

    def _flag_debug_and_p2p(self, sets: Sequence[_EnvSet]) -> None:
        for s in sets:
            value = _const_str(s.value)
            if s.key in DEBUG_KNOBS and value is not None:
                wanted = DEBUG_KNOBS[s.key]
                if wanted is None or value.strip().upper() in wanted:
                    self._add(
                        "GPF003",
                        s.node,
                        f"{s.key}={value} hard-coded: a debugging setting (verbose logs, "
                        "slower runs); set it in the shell for a debugging run instead",
                    )
            if s.key == P2P_DISABLE_VAR and value is not None and _nonzero(value):
                self._add(
                    "GPF004",
                    s.node,
                    f"{P2P_DISABLE_VAR}={value} set in code: a workaround that costs "
                    "GPU-to-GPU bandwidth and hides the cause (often PCIe ACS / IOMMU); "
                    "fix the host instead",
                )

    def _flag_data_parallel(self) -> None:
        for n in ast.walk(self.tree):
            if isinstance(n, ast.Call):
                q = self._resolve(n.func)
                if q in DATA_PARALLEL:
                    self._add(
                        "GPF002",
                        n,
                        f"{q} used: one process drives every GPU and it scales poorly "
                        "(worse past 8 GPUs); use DistributedDataParallel",
                    )

    def run(self, source: str) -> list[Finding]:
        # Substring tests first: most files name none of the variables, and skip the walks.
        env_keys = [k for k in (*CUDA_INIT_VARS, *DEBUG_KNOBS, P2P_DISABLE_VAR) if k in source]
        wants_dp = "DataParallel" in source or "data_parallel" in source
        if not env_keys and not wants_dp:
            return []
        self._bind_names()
        if env_keys:
            sets = [s for n in ast.walk(self.tree) for s in self._env_sets(n)]
            if any(s.key in CUDA_INIT_VARS for s in sets):
                self._flag_late_cuda_vars()
            self._flag_debug_and_p2p(sets)
        if wants_dp:
            self._flag_data_parallel()
        return [f for f in self.findings.values() if not self._suppressed(f)]

    def _suppressed(self, f: Finding) -> bool:
        if not 0 < f.line <= len(self.lines):
            return False
        m = _NOQA.search(self.lines[f.line - 1])
        if not m:
            return False
        if not m.group("colon"):
            return True  # bare noqa (no codes) silences every rule on the line, as in flake8/ruff
        codes = {c.upper() for c in re.split(r"[\s,]+", m.group("codes")) if c}
        return f.rule in codes


def _nonzero(value: str) -> bool:
    try:
        return int(value.strip()) != 0
    except ValueError:
        return False


# ---------------------------------------------------------------------------------- files


def lint_source(source: str | bytes, path: str = "<string>") -> list[Finding]:
    """Findings for one file's contents, sorted by position."""
    try:
        tree = ast.parse(source, filename=path)
    except SyntaxError as e:
        line = e.lineno or 1
        col = max(e.offset or 1, 1)
        return [
            Finding("GPF900", path, line, col, line, col, f"syntax error: {e.msg}; not checked")
        ]
    except (ValueError, RecursionError, MemoryError) as e:
        return [Finding("GPF900", path, 1, 1, 1, 1, f"could not parse: {e}; not checked")]
    data = source.encode("utf-8", "surrogatepass") if isinstance(source, str) else source
    if not any(k in data for k in _TRIGGERS):  # nothing any rule looks for: no walk at all
        return []
    text = source if isinstance(source, str) else source.decode("utf-8", "replace")
    found = _Checker(path, tree, text).run(text)
    return sorted(found, key=lambda f: (f.line, f.col, f.rule))


def iter_python_files(paths: Sequence[str]) -> Iterator[str]:
    """Files named on the command line, and *.py under directories (hidden dirs skipped)."""
    for p in paths:
        if os.path.isdir(p):
            for root, dirs, files in os.walk(p):
                dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _SKIP_DIRS)
                for name in sorted(files):
                    if name.endswith(".py"):
                        yield os.path.join(root, name)
        else:
            yield p


def lint_paths(paths: Sequence[str]) -> LintResult:
    """Lint files and directories; raises InvalidInput for a path that does not exist."""
    missing = [p for p in paths if not os.path.exists(p)]
    if missing:
        raise InvalidInput(f"no such file or directory: {missing[0]}")
    findings: list[Finding] = []
    count = 0
    for path in iter_python_files(paths):
        # the input layer: a regular file of bounded size (not a FIFO or /dev/zero behind a link)
        data = inputs.read_bytes(path, "source")
        count += 1
        findings.extend(lint_source(data, path))
    return LintResult(count, tuple(findings))


# ---------------------------------------------------------------------------------- output


def format_text(result: LintResult) -> str:
    return "".join(f"{f.path}:{f.line}:{f.col}: {f.rule} {f.message}\n" for f in result.findings)


def to_json(result: LintResult) -> dict[str, object]:
    counts: dict[str, int] = {}
    for f in result.findings:
        counts[f.rule] = counts.get(f.rule, 0) + 1
    return {
        "format": "gpufix-lint",
        "version": 1,
        "files_checked": result.files,
        "counts": counts,
        "findings": [f.to_dict() for f in result.findings],
    }


def _uri(path: str) -> str:
    p = Path(path)
    return p.as_uri() if p.is_absolute() else quote(p.as_posix())


def _physical(path: str, line: int, col: int, end_line: int, end_col: int) -> dict[str, object]:
    return {
        "artifactLocation": {"uri": _uri(path)},
        "region": {
            "startLine": line,
            "startColumn": col,
            "endLine": end_line,
            "endColumn": end_col,
        },
    }


def to_sarif(result: LintResult) -> dict[str, object]:
    """A SARIF 2.1.0 log with one run."""
    index = {r.id: i for i, r in enumerate(RULES)}
    results = []
    for f in result.findings:
        entry: dict[str, object] = {
            "ruleId": f.rule,
            "ruleIndex": index[f.rule],
            "level": f.level,
            "message": {"text": f.message},
            "locations": [
                {"physicalLocation": _physical(f.path, f.line, f.col, f.end_line, f.end_col)}
            ],
        }
        if f.related:
            entry["relatedLocations"] = [
                {
                    "id": i,
                    "message": {"text": r.message},
                    "physicalLocation": _physical(r.path, r.line, r.col, r.line, r.col),
                }
                for i, r in enumerate(f.related, start=1)
            ]
        results.append(entry)
    rules = [
        {
            "id": r.id,
            "name": r.name,
            "shortDescription": {"text": r.summary},
            "fullDescription": {"text": r.doc},
            "help": {"text": r.doc},
            "defaultConfiguration": {"level": r.level},
        }
        for r in RULES
    ]
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "gpufix-lint",
                        "version": __version__,
                        "rules": rules,
                    }
                },
                "columnKind": "unicodeCodePoints",
                "results": results,
            }
        ],
    }


def main_lint(
    paths: Sequence[str], fmt: str = "text", out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """Entry point for `gpufix lint PATH... [--json|--sarif]`: 0 clean, 1 findings, 3 bad input."""
    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    try:
        if fmt not in FORMATS:
            raise InvalidInput(f"unknown output format {fmt!r}; use one of {', '.join(FORMATS)}")
        result = lint_paths(list(paths) or ["."])
    except GpufixError as e:
        print(f"gpufix lint: error: {e}", file=err)
        return e.exit_code if e.exit_code else EXIT_INVALID
    if fmt == "json":
        out.write(json.dumps(to_json(result), indent=2) + "\n")
    elif fmt == "sarif":
        out.write(json.dumps(to_sarif(result), indent=2) + "\n")
    else:
        out.write(format_text(result))
        n = len(result.findings)
        plural = "" if n == 1 else "s"
        print(f"{n} finding{plural} in {result.files} file(s)", file=err)
    return result.exit_code


__all__ = [
    "EXIT_FINDINGS",
    "RULES",
    "Finding",
    "LintResult",
    "lint_paths",
    "lint_source",
    "main_lint",
    "to_json",
    "to_sarif",
]
