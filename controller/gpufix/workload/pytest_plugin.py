"""pytest plugin `gpufix`: environment-check markers, a facts fixture and --gpufix-preflight.

Registered as a pytest11 entry point, so it loads in every pytest run: it stays inert unless
used. Facts are gathered only when a test asks for `gpufix_facts`, a `gpu_check` test runs, or
--gpufix-preflight is given; and then once per session.
"""

from __future__ import annotations

import os
import sys
import warnings
from typing import Any

import pytest

_FACTS = pytest.StashKey[Any]()
_REPORT = pytest.StashKey[Any]()
NO_GPU = "no NVIDIA GPU on this host"  # the same words as gpufix.preflight.NO_GPU


class PreflightWarning(UserWarning):
    """A preflight check that passed with a warning."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gpufix")
    group.addoption(
        "--gpufix-preflight",
        action="store_true",
        default=False,
        help="add one test item per gpufix preflight check on this host",
    )
    group.addoption(
        "--gpufix-facts",
        metavar="FILE",
        default=None,
        help="use this gpufix facts snapshot instead of gathering facts on this host",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "env_check: a test of the host environment (select with -m env_check)"
    )
    config.addinivalue_line(
        "markers", "gpu_check: needs an NVIDIA GPU; skipped with a reason on hosts without one"
    )
    if config.getoption("--gpufix-facts"):
        _facts(config)  # a bad file is a usage error now, not a failure in every test


def _facts(config: pytest.Config) -> Any:
    """The session's facts snapshot, gathered (or read) once."""
    if _FACTS not in config.stash:
        from gpufix.errors import GpufixError
        from gpufix.facts.local import gather_local
        from gpufix.facts.snapshot import load_snapshot

        path = config.getoption("--gpufix-facts")
        try:
            snap = load_snapshot(path) if path else gather_local(python_envs=[sys.executable])
        except GpufixError as e:
            raise pytest.UsageError(f"gpufix: {e}") from None
        config.stash[_FACTS] = snap
    return config.stash[_FACTS]


@pytest.fixture(scope="session")
def gpufix_facts(pytestconfig: pytest.Config) -> Any:
    """This host's gpufix facts snapshot (gpufix.facts.Snapshot), gathered once per session."""
    return _facts(pytestconfig)


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("gpu_check") is None:
        return
    from gpufix.facts.snapshot import is_unknown, unknown_reason

    gpus = _facts(item.config).facts.get("gpus")
    if is_unknown(gpus):
        pytest.skip(f"could not tell whether this host has a GPU: {unknown_reason(gpus)}")
    if not gpus:
        pytest.skip(NO_GPU)


class PreflightFailed(Exception):
    pass


class PreflightItem(pytest.Item):
    """One preflight check as a test: pass, fail (with its evidence) or skip with its reason."""

    def __init__(self, *, check_id: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.check_id = check_id

    def runtest(self) -> None:
        from gpufix.cli.render import one_line
        from gpufix.workload import preflight

        config = self.config
        if _REPORT not in config.stash:
            config.stash[_REPORT] = preflight.run(_facts(config), env=_live_env(config))
        result = config.stash[_REPORT].check(self.check_id)
        if result.status == "skip":
            pytest.skip(one_line(result.message))
        if result.status == "fail":
            raise PreflightFailed(result)
        if result.status == "warn":
            message = f"{self.check_id}: {one_line(result.message)}"
            warnings.warn(PreflightWarning(message), stacklevel=1)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, PreflightFailed):
            from gpufix.cli.render import one_line

            result = excinfo.value.args[0]
            lines = [f"{result.id}: {one_line(result.message)}"]
            lines += [f"  {one_line(k)}: {one_line(v)}" for k, v in result.evidence.items()]
            return "\n".join(lines)
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[str, int | None, str]:
        return "gpufix-preflight", None, f"gpufix preflight: {self.check_id}"


def _live_env(config: pytest.Config) -> dict[str, str] | None:
    """The environment the checks read: this process's, unless the facts came from a file."""
    return None if config.getoption("--gpufix-facts") else dict(os.environ)


class PreflightCollector(pytest.Collector):
    def collect(self) -> list[pytest.Item]:
        from gpufix.workload.preflight import CHECK_IDS

        return [PreflightItem.from_parent(self, name=cid, check_id=cid) for cid in CHECK_IDS]


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    # tryfirst: ahead of -k / -m deselection, so those select preflight items too.
    if not config.getoption("--gpufix-preflight"):
        return
    collector = PreflightCollector.from_parent(
        session, name="gpufix-preflight", nodeid="gpufix-preflight"
    )
    found = collector.collect()
    # Report them as collected so the terminal's counts include them.
    config.hook.pytest_collectreport(
        report=pytest.CollectReport(collector.nodeid, "passed", None, list[Any](found))
    )
    items.extend(found)
