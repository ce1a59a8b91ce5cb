"""Shared pieces for the probe's tests: the program loaded from its file, a clean environment."""

from __future__ import annotations

import importlib.util
import os
import types
from pathlib import Path

import pytest
from gpufix.probe import program_path


@pytest.fixture(scope="module")
def prog() -> types.ModuleType:
    """The probe program as the host runs it (one file), loaded as a module."""
    spec = importlib.util.spec_from_file_location("gpufix_probe_under_test", program_path())
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def probe_env(tmp_path: Path, fault: str | None = None) -> dict[str, str]:
    """This environment without NCCL/fault settings, temp files under tmp_path."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GPUFIX_PROBE_FAULT", "NCCL_", "GLOO_"))
    }
    env["TMPDIR"] = str(tmp_path)
    if fault:
        env["GPUFIX_PROBE_FAULT"] = fault
    return env
