"""A documented NCCL problem that needs several nodes is not this single host's problem
(nccl_issues.yaml `setup`): 2.22.3 fixed "a hang when nodes have different CPU types"."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from gpufix.engine.kb import load
from gpufix.engine.nccl_installed import issues_of
from gpufix.facts.host import from_facts

HOSTS = Path(__file__).parents[1] / "fixtures" / "hosts"
KB = load()


def _ids(multi_node: bool) -> set[str]:
    f = copy.deepcopy(json.loads((HOSTS / "noble-4x5090.json").read_text())["facts"])
    return {i.id for i in issues_of(from_facts(f), KB, "2.21.5", multi_node)}


def test_the_mixed_cpu_hang_is_named_only_across_hosts() -> None:
    one, several = _ids(multi_node=False), _ids(multi_node=True)
    assert "mixed-cpu-hang" not in one and "mixed-cpu-hang" in several
    # A problem of any setup stays on both.
    assert "multi-comm-connect-hang" in one and "multi-comm-connect-hang" in several
