"""Shared pieces for the probe's tests: the program loaded from its file, a clean environment."""

from __future__ import annotations

import importlib.util
import json
import os
import types
from pathlib import Path
from typing import Any

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


def as_recorded_host(verdict: dict[str, Any], snapshot: Path) -> dict[str, Any]:
    """A verdict run here, made the verdict of the recorded host it is planned with: its own
    readings of the kernel and driver become that host's. gpufix refuses a verdict that names
    none of the host's names and read another kernel or driver (planning.another_machine)."""
    facts = json.loads(snapshot.read_text())["facts"]
    seen = dict(verdict.get("facts") or {})
    seen["kernel"] = facts["kernel"]["running"]
    if seen.get("driver"):
        seen["driver"] = facts["driver"]["kernel_module"]
    return {**verdict, "facts": seen}
