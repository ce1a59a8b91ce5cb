"""Version strings hosts report: what parses, and what must stay unknown (issue 10)."""

from __future__ import annotations

import pytest
from gpufix import versions
from packaging.version import Version


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("535.183.01", "535.183.1"),
        ("1:535.183.01-0ubuntu1", "535.183.1"),
        ("470.223.02-0ubuntu0.22.04.1", "470.223.2"),
        ("570.26", "570.26"),
        ("535", "535"),
    ],
)
def test_driver_versions_parse(text: str, want: str) -> None:
    assert versions.driver(text) == Version(want)


@pytest.mark.parametrize("text", ["abc", "", "  ", "-1", "535.abc", "v535", None, True, "535 abc"])
def test_unreadable_driver_is_unknown(text: object) -> None:
    assert versions.driver(text) is None
    assert versions.driver_branch(text) is None


def test_driver_branch() -> None:
    assert versions.driver_branch("535.183.01") == 535
    assert versions.driver_branch(580) == 580
    assert versions.driver_branch(0) is None


@pytest.mark.parametrize("text", ["-1", "-5.4.0", "abc", "", "linux 5.4"])
def test_kernel_that_is_not_a_version_is_unknown(text: str) -> None:
    assert versions.kernel(text) is None
    assert versions.major_minor(text) is None
    assert versions.at_least(text, "5.5") is None


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("5.4.0-150-generic", (5, 4, 0)),
        ("6.8.0-1012-nvidia", (6, 8, 0)),
        ("4.15.0-213-generic", (4, 15, 0)),
        ("5.4.0.150.167~18.04.1", (5, 4, 0)),
    ],
)
def test_kernels_parse(text: str, want: tuple[int, int, int]) -> None:
    assert versions.kernel(text) == want


def test_nvcc_and_wheel_versions_still_parse() -> None:
    assert versions.major_minor("V11.8.89") == (11, 8)
    assert versions.parse("2.1.2+cu121") == Version("2.1.2+cu121")
    assert versions.major_minor("12.1.105-1") == (12, 1)


@pytest.mark.parametrize("bad", ["abc", "", "-1"])
def test_unparsable_driver_is_unknown_to_the_engine_not_too_old(bad: str) -> None:
    """An unreadable driver version never yields 'needs a newer driver' or a driver move."""
    import json
    from pathlib import Path

    from gpufix.engine.decide import decide
    from gpufix.engine.kb import load
    from gpufix.engine.rules import load as load_rules

    path = Path(__file__).parent / "fixtures" / "hosts" / "jammy-470-torch23.json"
    facts = json.loads(path.read_text())["facts"]
    facts["driver"] = dict(facts["driver"], kernel_module=bad, userspace=bad)
    plan = decide(facts, None, kb=load(), rules=load_rules())
    assert "torch-cuda-needs-newer-driver" not in {f.id for f in plan.findings}
    assert plan.strategy != "driver-pin"
    pin = next(o for o in plan.options if o.strategy == "driver-pin")
    assert not pin.feasible
