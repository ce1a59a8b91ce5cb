"""Every torch 2.x release on PyPI is known to the tables the stack chooser reads: its wheels
(torch_releases.yaml) and the NCCL its default wheel pins (torch_nccl.yaml).

PyPI's release list (https://pypi.org/pypi/torch/json) read 2026-12-01: 2.12.1 (17 Jun 2026) sits
between 2.12.0 and 2.13.0; 2.15.0 is the newest.
"""

from __future__ import annotations

import pytest
from gpufix.engine.kb import load

KB = load()
ON_PYPI = (
    "2.10.0", "2.11.0", "2.12.0", "2.12.1", "2.13.0", "2.14.0", "2.14.1", "2.15.0",
)  # fmt: skip


@pytest.mark.parametrize("torch", ON_PYPI)
def test_each_release_has_its_own_rows(torch: str) -> None:
    assert KB.torch_release(torch) is not None, torch
    row = KB.torch_nccl_version(torch)
    assert row is not None and row.torch == torch  # its own row, not its minor's


def test_2_12_1_is_recorded_like_2_12_0() -> None:
    # torch-2.12.1-cp312-cp312-manylinux_2_28_x86_64.whl METADATA: Requires-Python >=3.10,
    # cuda-toolkit==13.0.2, nvidia-nccl-cu13==2.29.7; wheels cp310-cp314, manylinux_2_28.
    rel = KB.torch_release("2.12.1")
    assert rel is not None
    assert (rel.python_min, rel.python_max, rel.glibc_min) == ("3.10", "3.14", "2.28")
    assert rel.cuda == ("12.6", "13.0")
    nccl = KB.torch_nccl_version("2.12.1")
    assert nccl is not None and (nccl.cuda, nccl.nccl) == ("13.0", "2.29.7")
    assert nccl.package == "nvidia-nccl-cu13"
    build = KB.torch_build("2.12.1", "12.6")
    assert build is not None and "7.0" in build.archs
