"""A driver older than any torch build in the table gets no wheel. Noticed 2026-12-07 on the
corpus case nccl-tests#5 (test split; driver 384.66 on 16.04) while checking why the 16.04 row
moved it: its plan had been torch 1.8.1+cu101 "through minor-version compatibility", which CUDA
10 does not have (cu101 needs 418.39, Table 3); the table had no 10.1 row, and an unknown was
read as minor-version compatibility."""

from __future__ import annotations

from gpufix.engine.kb import load
from gpufix.engine.stack import driver_runs_cuda

KB = load()


def test_cuda_10_1_needs_its_own_minimum() -> None:
    assert driver_runs_cuda(KB, "384.66", (10, 1)) == (False, False)
    assert driver_runs_cuda(KB, "418.39", (10, 1)) == (True, False)
