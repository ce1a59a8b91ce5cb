"""The post-reboot multi-GPU probe: the standalone program and controller-side helpers."""

from gpufix.probe.local import (
    load_program,
    load_verdict,
    program_path,
    run_local,
    validate,
)
from gpufix.probe.summary import summarize

__all__ = ["load_program", "load_verdict", "program_path", "run_local", "summarize", "validate"]
