"""Gather facts on this machine without Ansible, by importing the facts module by path."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from gpufix.errors import GpufixError
from gpufix.facts.snapshot import Snapshot, from_module_result
from gpufix.paths import facts_module


def module_path() -> Path:
    """plugins/modules/gpufix_facts.py of the installed content (paths.content_root)."""
    path = facts_module()
    if not path.is_file():
        raise GpufixError(f"cannot find the facts module at {path}: reinstall gpufix")
    return path


def load_module() -> ModuleType:
    path = module_path()
    spec = importlib.util.spec_from_file_location("gpufix_facts_module", path)
    if spec is None or spec.loader is None:
        raise GpufixError(f"cannot load the facts module from {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def gather_local(
    python_envs: list[str] | None = None, timeout: int = 10, host: str = "localhost"
) -> Snapshot:
    """Run the facts module's gather() in this process and wrap the result as a Snapshot."""
    if timeout < 1:
        raise GpufixError("timeout must be at least 1 second")
    module = load_module()
    facts = module.gather({"python_envs": list(python_envs or []), "timeout": timeout})
    return from_module_result(host, {"gpufix": facts})
