"""pytest plugin `gpufix`: environment-check markers, a facts fixture and --gpufix-preflight.

Registered as a pytest11 entry point, so it loads in every pytest run: it must stay inert
unless used (no imports of the heavy parts, no facts gathered, until asked).
"""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gpufix")
    group.addoption(
        "--gpufix-preflight",
        action="store_true",
        default=False,
        help="add one test item per gpufix preflight check on this host",
    )
