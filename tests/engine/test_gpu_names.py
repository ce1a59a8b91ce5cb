"""Compute capability from the GPU name when the facts lack it. R470's nvidia-smi has no
compute_cap field (the recorded bionic/jammy 470 hosts: query_470_invalid_field.txt, then
query_470_fallback.csv), so without this the engine would not know a 470 host's architecture;
NVIDIA's CUDA GPUs tables give it per model (knowledge/gpu_models.yaml)."""

from __future__ import annotations

import copy
import json
import shutil
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml
from gpufix.engine import decide as engine
from gpufix.engine.gpu_names import with_named_caps
from gpufix.engine.kb import DEFAULT_DIR, load
from gpufix.engine.rules import load as load_rules
from gpufix.errors import GpufixError
from gpufix.facts.host import from_facts

HOSTS = Path(__file__).parents[1] / "fixtures" / "hosts"
KB = load()
decide = partial(engine.decide, kb=KB, rules=load_rules())


def facts(name: str) -> dict[str, Any]:
    return copy.deepcopy(json.loads((HOSTS / f"{name}.json").read_text())["facts"])


@pytest.mark.parametrize(
    ("name", "cc"),
    [
        ("NVIDIA GeForce RTX 3090", "8.6"),
        ("NVIDIA A10G", "8.6"),  # A10 followed by a letter: same model family
        ("NVIDIA A100-SXM4-80GB", "8.0"),  # not A10
        ("NVIDIA L40S", "8.9"),
        ("NVIDIA L4", "8.9"),
        ("NVIDIA H20", "9.0"),
        ("NVIDIA GH200 480GB", "9.0"),  # GH200, not H200 inside it
        ("NVIDIA GB200", "10.0"),
        ("NVIDIA B300 SXM6 AC", "10.3"),  # Blackwell Ultra: open modules, R570 or newer
        ("NVIDIA GB300", "10.3"),  # GB300, not B300 inside it
        ("NVIDIA GB10", "12.1"),  # DGX Spark; not GB100
        ("Tesla P100-PCIE-16GB", "6.0"),
        ("Tesla P4", "6.1"),
        ("Tesla V100S-PCIE-32GB", "7.0"),
        ("Quadro RTX 6000", "7.5"),
        ("NVIDIA RTX PRO 2000 Blackwell", "12.0"),  # rows added 2026-12-06 from the CUDA GPUs page
        ("NVIDIA GeForce RTX 4050 Laptop GPU", "8.9"),
        ("NVIDIA RTX A3000 12GB Laptop GPU", "8.6"),
        ("NVIDIA RTX 6000 Ada Generation", "8.9"),
        ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "12.0"),
        ("TITAN X (Pascal)", "6.1"),
        ("GeForce GTX TITAN X", "5.2"),
        ("tesla t4", "7.5"),  # case ignored
        ("NVIDIA TITAN X", None),  # two generations under one name: the facts must say
        ("Quadro P4000", None),  # not P4, not P40
        ("NVIDIA RTX A4000", "8.6"),  # not A40
    ],
)
def test_a_gpu_name_reads_the_capability_nvidia_lists(name: str, cc: str | None) -> None:
    assert KB.compute_capability_of(name) == cc


@pytest.mark.parametrize(
    ("name", "mnnvl"),
    [
        ("NVIDIA GB200", True),  # NVL72 racks: one NVLink domain over 18 hosts
        ("NVIDIA GB300", True),
        ("NVIDIA B200", False),  # HGX B200: NVLink inside one host only
        ("NVIDIA B300 SXM6 AC", False),  # not GB300, though B300 is inside that name
        ("NVIDIA H100 80GB HBM3", False),
        ("NVIDIA GH200 480GB", False),
        ("NVIDIA TITAN X", False),  # no row at all
    ],
)
def test_only_models_whose_racks_span_hosts_form_multi_node_nvlink(name: str, mnnvl: bool) -> None:
    assert KB.forms_multi_node_nvlink(name) is mnnvl


def test_multi_node_nvlink_must_be_true_or_false(tmp_path: Path) -> None:
    d = tmp_path / "knowledge"
    shutil.copytree(DEFAULT_DIR, d)
    rows = yaml.safe_load((d / "gpu_models.yaml").read_text())
    rows[0]["multi_node_nvlink"] = "yes"
    (d / "gpu_models.yaml").write_text(yaml.safe_dump(rows, sort_keys=False))
    with pytest.raises(GpufixError, match=r"gpu_models\.yaml row 1 .*multi_node_nvlink"):
        load(d)


def test_a_470_host_takes_its_capabilities_from_the_gpu_names() -> None:
    f = facts("bionic-ga-2x3090")
    assert all("unknown" in g["compute_capability"] for g in f["gpus"])  # what R470 gives
    h = with_named_caps(from_facts(f), KB)
    assert h.compute_caps == ("8.6", "8.6") and h.compute_caps_named
    plan = decide(f)
    [found] = [x for x in plan.findings if x.id == "compute-capability-from-name"]
    assert found.severity == "info" and "8.6" in found.message and "RTX 3090" in found.message
    assert "R470's nvidia-smi" in found.message  # the reason, on this 470 host


def test_the_r470_reason_is_not_given_for_another_driver() -> None:
    """An expert review (2026-12-06): 66 corpus plans said "R470's nvidia-smi has no compute_cap
    field" whatever their driver (525-580 among them)."""
    f = facts("bionic-ga-2x3090")
    f["driver"]["kernel_module"] = f["driver"]["userspace"] = "550.54.15"
    [found] = [x for x in decide(f).findings if x.id == "compute-capability-from-name"]
    assert "the facts do not carry it" in found.message and "R470" not in found.message


def test_capabilities_the_facts_carry_are_kept() -> None:
    h = with_named_caps(from_facts(facts("jammy-4xp100-torch28")), KB)
    assert h.compute_caps == ("6.0",) * 4 and not h.compute_caps_named


def test_one_unknown_name_leaves_every_capability_unknown() -> None:
    """A partial list would hide a GPU from the checks that need every GPU driven."""
    f = facts("bionic-ga-2x3090")
    f["gpus"][1]["name"] = "NVIDIA TITAN X"
    h = with_named_caps(from_facts(f), KB)
    assert h.compute_caps == () and not h.compute_caps_named


def test_a_pascal_host_without_capabilities_still_sees_the_dropped_architecture() -> None:
    """P100s under a torch build without sm_60 kernels, facts without the capability: the
    finding and a build with sm_60 kernels, as when the facts carry it."""
    f = facts("jammy-4xp100-torch28")
    for g in f["gpus"]:
        g["compute_capability"] = {
            "unknown": "nvidia-smi: compute_cap not supported by this driver"
        }
    plan = decide(f)
    assert any(x.id == "gpu-arch-dropped" for x in plan.findings)
    assert plan.strategy == "cuda-downgrade"
    assert "6.0" in plan.extra["stack"]["archs"]


def test_a_capability_in_no_architecture_is_refused(tmp_path: Path) -> None:
    d = tmp_path / "knowledge"
    shutil.copytree(DEFAULT_DIR, d)
    rows = yaml.safe_load((d / "gpu_models.yaml").read_text())
    # Jetson T5000 (11.0) is left out of gpu_archs.yaml: not a PCIe host GPU
    rows.append({"match": "T5000", "compute_capability": "11.0", "source": "test"})
    (d / "gpu_models.yaml").write_text(yaml.safe_dump(rows, sort_keys=False))
    with pytest.raises(
        GpufixError, match=r"gpu_models\.yaml row .* 11\.0 is in no gpu_archs\.yaml"
    ):
        load(d)


@pytest.mark.parametrize(
    ("name", "p2p", "cc"),
    [
        ("NVIDIA GeForce RTX 4090", False, "8.9"),
        ("RTX4090", False, "8.9"),
        ("rtx 4090", False, "8.9"),
        ("A6000", None, "8.6"),
        ("RTX 2080Ti", None, "7.5"),
        ("RTX3090", None, "8.6"),
        ("RTX 4000 Ada Generation", None, "8.9"),
    ],
)
def test_both_gpu_tables_read_a_name_spelled_without_nvidias_spaces(
    name: str, p2p: bool | None, cc: str
) -> None:
    """Reports write "RTX4090", "2080Ti", "A6000": the P2P table and the model table take the
    same spelling (kb.gpu_name), so one unmatched name no longer hides a host's capability."""
    from gpufix.engine.kb import load

    kb = load()
    assert kb.gpu_p2p_capable(name) is p2p
    assert kb.compute_capability_of(name) == cc


@pytest.mark.parametrize("cc", ["10.3", "12.1"])
def test_blackwell_ultra_and_gb10_are_blackwell(cc: str) -> None:
    """CUDA 12.9's targets: without them a B300 host on R470 read as an unknown architecture,
    so neither Blackwell's R570 minimum nor its open-module rule applied (review, 2026-12-03)."""
    arch = KB.arch_for_cc(cc)
    assert arch is not None and arch.name == "Blackwell" and arch.kernel_modules == "open"
