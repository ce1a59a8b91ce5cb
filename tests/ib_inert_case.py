"""One training module for the NCCL_IB_DISABLE exemption tests (lint/ibinert.py): the writes
under test go into `setup` (from line 7), another function's writes into `other`."""

from __future__ import annotations

from pathlib import Path

from gpufix.workload.lint import lint_paths
from gpufix.workload.lint.model import LintFinding

TEMPLATE = """\
import os

import torch.distributed as dist


def setup(args=None, nodes=1):
{body}
    dist.init_process_group("nccl")


def other():
{other}
    dist.init_process_group("nccl")
"""


def findings(tmp_path: Path, body: str, other: str = "    pass") -> list[LintFinding]:
    (tmp_path / "train.py").write_text(TEMPLATE.format(body=body, other=other))
    return list(lint_paths([str(tmp_path)]).findings)


def gpf010(tmp_path: Path, body: str, other: str = "    pass") -> list[str]:
    """GPF010 findings as `line:VARIABLE`."""
    found = findings(tmp_path, body, other)
    return [f"{f.line}:{f.message.split('=')[0]}" for f in found if f.rule == "GPF010"]
