"""torch's CUDA variants on download.pytorch.org can pin another NCCL than PyPI's default wheel
(torch_nccl.yaml, `variant: true` rows): RELEASE.md's release compatibility matrix lists NCCL
2.29.3 for the CUDA 12.6 builds of 2.12-2.14, whose default wheels (CUDA 13.0) pin 2.29.7 or
2.30.7. The 12.6 build is the one left for Maxwell, Pascal and Volta GPUs, so such a host runs the
older NCCL. The host is the recorded noble 4x RTX 5090 host with V100 GPUs (driver 575.57.08).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
import yaml
from gpufix.engine import stack_choice
from gpufix.engine.conditions import nccl_version
from gpufix.engine.context import Ctx
from gpufix.engine.kb import DEFAULT_DIR, load
from gpufix.errors import GpufixError
from gpufix.facts.host import from_facts
from recorded import recorded

KB = load()


def volta_host(torch: str) -> dict[str, Any]:
    return recorded("noble-4x5090", torch, "Tesla V100-SXM2-32GB", "7.0")


@pytest.mark.parametrize(
    ("torch", "cuda", "nccl"),
    [
        ("2.13.0", None, "2.29.7"),  # PyPI's default wheel (CUDA 13.0)
        ("2.13.0", "13.0", "2.29.7"),  # the variant that is the default wheel
        ("2.13.0", "12.6", "2.29.3"),
        ("2.13.0", (12, 6), "2.29.3"),  # as versions.cuda_from_tag reads '+cu126'
        ("2.13.0", "13.2", "2.29.7"),  # no row of its own: the default wheel's
        ("2.12.1", "12.6", "2.29.3"),
        ("2.14.1", "12.6", "2.29.3"),
        ("2.14.1", None, "2.30.7"),
        ("2.14.9", "12.6", "2.29.3"),  # not recorded: the newest of its minor, same variant
        ("2.10.0", "13.0", "2.28.9"),
        ("2.10.0", "12.8", "2.27.5"),
    ],
)
def test_a_cuda_variant_reads_its_own_nccl(torch: str, cuda: object, nccl: str) -> None:
    row = KB.torch_nccl_version(torch, cuda)
    assert row is not None and row.nccl == nccl


def test_the_installed_cu126_build_runs_its_own_nccl() -> None:
    h = from_facts(volta_host("2.13.0+cu126"))
    ctx = cast(Ctx, SimpleNamespace(host=h, kb=KB))
    assert nccl_version(ctx) == "2.29.3"
    pypi = from_facts(volta_host("2.13.0"))
    assert nccl_version(cast(Ctx, SimpleNamespace(host=pypi, kb=KB))) == "2.29.7"


def test_a_volta_host_moving_up_is_told_the_cu126_build_s_nccl() -> None:
    h = from_facts(volta_host("2.9.0+cu126"))
    best = stack_choice.choose(h, KB, stack_choice.Want("up"))
    assert best is not None and best["cuda"] == "12.6", best
    assert best["torch"] in ("2.12.1", "2.13.0", "2.14.0", "2.14.1"), best
    assert best["nccl"] == "2.29.3"


def refused(tmp_path: Path, extra: dict[str, Any], drop_default: str | None = None) -> str:
    """Loading the shipped knowledge with one more torch_nccl row (and maybe without a release's
    default-wheel row) fails with this one-line message."""
    d = tmp_path / "knowledge"
    shutil.copytree(DEFAULT_DIR, d)
    path = d / "torch_nccl.yaml"
    rows = yaml.safe_load(path.read_text())
    rows = [r for r in rows if r["torch"] != drop_default or r.get("variant")] + [extra]
    path.write_text(yaml.safe_dump(rows, sort_keys=False))
    with pytest.raises(GpufixError) as e:
        load(d)
    assert "\n" not in str(e.value)
    return str(e.value)


VARIANT = {"torch": "2.13.0", "cuda": "12.8", "nccl": "2.29.3", "package": "nvidia-nccl-cu12",
           "variant": True, "source": "test"}  # fmt: skip


def test_a_variant_for_the_default_wheel_s_own_cuda_is_refused(tmp_path: Path) -> None:
    message = refused(tmp_path, {**VARIANT, "cuda": "13.0"})
    assert "torch_nccl.yaml row" in message and "(2.13.0, CUDA 13.0)" in message
    assert "for another CUDA" in message


def test_a_variant_without_its_default_wheel_is_refused(tmp_path: Path) -> None:
    message = refused(tmp_path, VARIANT, drop_default="2.13.0")
    assert "a variant needs the default wheel's row" in message


@pytest.mark.parametrize("extra", [{**VARIANT, "cuda": "12.6"}, {**VARIANT, "variant": False}])
def test_a_second_row_for_one_wheel_is_refused(tmp_path: Path, extra: dict[str, Any]) -> None:
    assert "a second row for the same wheel" in refused(tmp_path, extra)
