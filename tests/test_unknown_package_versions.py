"""A package version a hand-written snapshot leaves unknown (`{"unknown": why}`, allowed since
2026-12-07) never reaches text as a Python dict: the preflight's CUDA reading and `gpufix diff`
skip it like a package that is not there (review, 2026-12-07)."""

from __future__ import annotations

from gpufix.engine.kb import load
from gpufix.facts.diff import _torch_nccl
from gpufix.workload.preflight import _cuda_of_env

UNKNOWN = {"unknown": "not in the thread"}


def test_the_preflight_does_not_name_an_unknown_nccl_wheel() -> None:
    _, major, how = _cuda_of_env({"torch": "2.3.0", "nvidia-nccl-cu12": UNKNOWN}, load())
    assert major is None and "unknown" not in how
    _, major, how = _cuda_of_env({"torch": "2.3.0", "nvidia-nccl-cu12": "2.20.5"}, load())
    assert major == 12 and "nvidia-nccl-cu12 2.20.5" in how


def test_diff_does_not_print_an_unknown_nccl_wheel() -> None:
    env = {"python": "/usr/bin/python3", "version": "3.10.12",
           "packages": {"torch": "2.3.0", "nvidia-nccl-cu12": UNKNOWN}}  # fmt: skip
    text = _torch_nccl({"python_envs": [env], "nccl": {"env": {}}})
    assert "{" not in text
