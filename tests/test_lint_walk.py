"""The lint's fast ways through a tree find what the slow ones find: `stmts.calls_in` against
ast.walk, and `callsites.call_sites_in` (the calls inside some top-level defs, without indexing
the whole module) against the whole module's index filtered the same way."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest
from gpufix.workload.lint.callsites import CallSite, call_sites, call_sites_in
from gpufix.workload.lint.project import SourceFile
from gpufix.workload.lint.stmts import calls_in

SHAPES = """\
import torch
from torch.nn.parallel import DistributedDataParallel as DDP
global_total = sum(x.cuda() for x in range(3))


@torch.no_grad()
def f(a, *, b=None, c=torch.device("cuda", 0), **kw) -> torch.Tensor:
    global global_total
    d = {**kw, "k": len(a)}
    if (n := len(d)) > 1:
        g = lambda z: z.to("cuda:0")
        return [g(v) for v in d.values() if callable(v)]
    try:
        torch.cuda.set_device(int(b))
    except (ValueError, TypeError) as e:
        print(f"{e!r:>{len(str(e))}}")
    match a:
        case {"x": int(x)} | [x, *_] if check(x):
            return DDP(x, device_ids=[0])
        case torch.Tensor(shape=s):
            return s
    with open(str(a)) as fh, torch.cuda.device(0):
        del fh
    async def inner():
        nonlocal n
        await other(n)
        async for q in stream():
            yield q


class Model(torch.nn.Module, metaclass=make_meta()):
    size: int = compute()

    def forward(self, x):
        return self.net(x).cuda(0)


if torch.cuda.is_available():
    def on_gpu():
        return torch.zeros(1).cuda(0)
else:
    try:
        def on_cpu():
            return torch.zeros(1)
    finally:
        cleanup()
with torch.no_grad():
    def under_with():
        return torch.ones(1).to("cuda:0")
"""


def _walk_calls(node: ast.AST) -> list[int]:
    return sorted(id(n) for n in ast.walk(node) if isinstance(n, ast.Call))


def test_calls_in_finds_every_call_of_the_shapes() -> None:
    tree = ast.parse(SHAPES)
    found = calls_in(tree)
    assert sorted(map(id, found)) == _walk_calls(tree)
    assert len(found) > 30  # the snippet is rich enough to mean something
    assert all(isinstance(c, ast.Call) for c in found)


@pytest.mark.skipif(sys.version_info < (3, 12), reason="PEP 695 syntax needs Python 3.12")
def test_calls_in_reads_type_parameters() -> None:
    tree = ast.parse("def f[T: make_bound()](x: T) -> T: return g(x)\ntype A[U] = h(U)\n")
    assert sorted(map(id, calls_in(tree))) == _walk_calls(tree)


def test_calls_in_matches_ast_walk_on_the_project_itself() -> None:
    package = Path(__file__).parents[1] / "controller" / "gpufix"
    files = sorted(package.rglob("*.py"))
    assert len(files) > 50
    for path in files:
        tree = ast.parse(path.read_bytes())
        assert sorted(map(id, calls_in(tree))) == _walk_calls(tree), path


def _source(text: str) -> SourceFile:
    data = text.encode()
    return SourceFile("m.py", "m.py", "code", data, ast.parse(data))


def _key(c: CallSite) -> tuple[int, int, str | None, tuple[str, ...], int]:
    return c.node.lineno, c.node.col_offset, c.name, c.owners, len(c.tests)


@pytest.mark.parametrize(
    "tops",
    [{"f"}, {"Model"}, {"on_gpu", "on_cpu"}, {"under_with"}, {"f", "Model", "inner"}, set()],
)
def test_call_sites_in_is_the_index_filtered_by_top_level_name(tops: set[str]) -> None:
    partial = call_sites_in(_source(SHAPES), tops)  # built without the module's index
    whole = [c for c in call_sites(_source(SHAPES)) if c.owners and c.owners[0] in tops]
    assert [_key(c) for c in partial] == [_key(c) for c in whole]
    if tops and tops != {"inner"}:
        assert partial  # every name but a nested one has calls on the index's lines


def test_call_sites_in_reuses_a_built_index() -> None:
    sf = _source(SHAPES)
    whole = call_sites(sf)
    assert call_sites_in(sf, {"Model"}) == [c for c in whole if c.owners[:1] == ("Model",)]


def test_the_walk_bench_finds_the_same_calls_both_ways(capsys: pytest.CaptureFixture[str]) -> None:
    from bench_scripts import load_bench

    lint_dir = Path(__file__).parents[1] / "controller" / "gpufix" / "workload" / "lint"
    assert load_bench("walk_bench").main([str(lint_dir), "--repeat", "1"]) == 0
    assert "x the CPU time of ast.walk" in capsys.readouterr().out
