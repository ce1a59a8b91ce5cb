"""The `gpufix` pytest plugin, driven through pytester (it loads from the pytest11 entry point)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from gpufix.facts.snapshot import Snapshot, save_snapshot
from gpufix.workload.preflight import CHECK_IDS
from test_preflight import BIONIC_2X3090

pytest_plugins = ["pytester"]


def _snapshot(tmp: Path, name: str, **changes: object) -> str:
    facts = copy.deepcopy(BIONIC_2X3090)
    facts.update(changes)
    path = tmp / f"{name}.json"
    save_snapshot(Snapshot(name, "2026-11-29T21:00:00Z", facts), path)
    return str(path)


def test_inert_unless_used(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import sys
        def test_nothing_gathered():
            assert "gpufix.facts.local" not in sys.modules
            assert "gpufix.workload.preflight" not in sys.modules
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert "gpufix-preflight" not in result.stdout.str()


def test_markers_are_registered(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--markers")
    result.stdout.fnmatch_lines(["@pytest.mark.env_check:*", "@pytest.mark.gpu_check:*"])
    pytester.makepyfile(
        """
        import pytest
        @pytest.mark.env_check
        def test_env():
            pass
        """
    )
    pytester.runpytest("--strict-markers").assert_outcomes(passed=1)


def test_one_item_per_check_with_recorded_facts(pytester: pytest.Pytester, tmp_path: Path) -> None:
    bad = _snapshot(tmp_path, "host02", env={"CUDA_VISIBLE_DEVICES": "0,7"})
    result = pytester.runpytest("--gpufix-preflight", "--gpufix-facts", bad, "-v", "-rA")
    # fabric-manager skips on a host without NVSwitch
    result.assert_outcomes(passed=len(CHECK_IDS) - 2, failed=1, skipped=1, warnings=1)
    result.stdout.fnmatch_lines(
        [
            "*gpufix-preflight::kernel PASSED*",
            "*gpufix-preflight::visible-devices FAILED*",
            "*visible-devices: CUDA_VISIBLE_DEVICES=0,7: entry '7' is not one of*",
            "*PreflightWarning: kernel: kernel 5.4.0-150-generic is below 5.5.0*",
        ]
    )
    assert result.ret == 1


def test_selection_and_skips_without_gpu(pytester: pytest.Pytester, tmp_path: Path) -> None:
    no_gpu = _snapshot(tmp_path, "cpu01", gpus=[])
    pytester.makepyfile(
        """
        import pytest
        @pytest.mark.gpu_check
        def test_needs_gpu():
            raise AssertionError("must not run without a GPU")
        @pytest.mark.env_check
        def test_facts(gpufix_facts):
            assert gpufix_facts.host == "cpu01"
        """
    )
    result = pytester.runpytest(
        "--gpufix-preflight", "--gpufix-facts", no_gpu, "-rs", "-k", "not kernel"
    )
    # nccl-config and driver-mismatch still apply without a GPU; the GPU checks skip.
    result.assert_outcomes(passed=3, skipped=7, deselected=1)
    result.stdout.fnmatch_lines(["*SKIPPED*no NVIDIA GPU on this host*"])
    assert result.ret == 0


def test_fixture_gathers_once_per_session(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest
        SEEN = []
        @pytest.mark.parametrize("n", range(3))
        def test_same(gpufix_facts, n):
            SEEN.append(id(gpufix_facts))
            assert len(set(SEEN)) == 1
            assert gpufix_facts.facts["os"]["id"]
        """
    )
    pytester.runpytest().assert_outcomes(passed=3)


def test_on_this_host(pytester: pytest.Pytester) -> None:
    """Real facts here: no NVIDIA GPU, so every GPU check is skipped with that reason."""
    result = pytester.runpytest("--gpufix-preflight", "-rs", "-v")
    out = result.stdout.str()
    assert "gpufix-preflight::shm SKIPPED (no NVIDIA GPU on this host)" in out, out
    assert result.ret == 0


def test_bad_facts_file_is_a_usage_error(pytester: pytest.Pytester, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("[]")
    result = pytester.runpytest("--gpufix-preflight", "--gpufix-facts", str(bad))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: gpufix: *not a gpufix facts snapshot*"])
