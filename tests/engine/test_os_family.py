"""A host that is not Debian-family: the fix class stands, the plan says gpufix's roles cannot
apply it there, and RHEL's "(Ootpa)" is not looked up as an Ubuntu release. os-release(5):
ID_LIKE lists the distributions an OS derives from; the facts module reads it since 1.4.0."""

from __future__ import annotations

import copy
import json
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from gpufix.engine import decide as engine
from gpufix.engine.kb import load
from gpufix.engine.rules import load as load_rules
from gpufix.errors import InvalidInput
from gpufix.facts.local import load_module
from gpufix.facts.snapshot import validate

decide = partial(engine.decide, kb=load(), rules=load_rules())
HOSTS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"
g = load_module()

RHEL8 = (
    'NAME="Red Hat Enterprise Linux"\nVERSION="8.8 (Ootpa)"\nID="rhel"\nID_LIKE="fedora"\n'
    'VERSION_ID="8.8"\nPRETTY_NAME="Red Hat Enterprise Linux 8.8 (Ootpa)"\n'
)
MINT = (
    'NAME="Linux Mint"\nVERSION="22.3 (Zena)"\nID=linuxmint\nID_LIKE="ubuntu debian"\n'
    'VERSION_ID="22.3"\nPRETTY_NAME="Linux Mint 22.3"\nVERSION_CODENAME=zena\n'
    "UBUNTU_CODENAME=noble\n"
)
OTHER_OS = "is not Debian-family"


def snapshot(name: str, os_release: str | None = None) -> dict[str, Any]:
    snap: dict[str, Any] = copy.deepcopy(json.loads((HOSTS / f"{name}.json").read_text()))
    if os_release is not None:
        snap["facts"]["os"] = g.parse_os_release(os_release)
    return snap


def test_a_driver_move_on_rhel_is_still_the_driver_move() -> None:
    # A 470 driver under a CUDA 12.1 wheel: the driver must rise. "ootpa" once failed the
    # package lookup ("neither the Ubuntu archive nor NVIDIA's repository lists them for
    # ootpa") and the plan fell to another strategy.
    plan = decide(snapshot("jammy-470-torch23", RHEL8)["facts"])
    assert plan.strategy == "driver-pin"
    (step,) = plan.steps
    assert "from the NVIDIA packages for this OS" in step.description
    assert "nvidia-driver-" not in step.description
    (line,) = [r for r in plan.risks if OTHER_OS in r]
    assert line.startswith("rhel 8.8 is not Debian-family (os-release ID_LIKE: fedora)")
    assert "driver_pin.yml" in line and "changes nothing" in line
    assert not any("whether its repositories carry" in r for r in plan.risks)


def test_the_same_host_on_ubuntu_names_the_archive_package() -> None:
    plan = decide(snapshot("jammy-470-torch23")["facts"])
    assert plan.strategy == "driver-pin"
    assert "nvidia-driver-580" in plan.steps[0].description
    assert not any(OTHER_OS in r for r in plan.risks)


def test_a_derivative_is_debian_family_and_uses_its_ubuntu_codename() -> None:
    plan = decide(snapshot("jammy-470-torch23", MINT)["facts"])
    assert plan.strategy == "driver-pin"
    assert "from the Ubuntu archive" in plan.steps[0].description
    assert not any(OTHER_OS in r for r in plan.risks)


def test_hand_written_rhel_without_id_like_is_not_an_ubuntu_release() -> None:
    f = snapshot("jammy-470-torch23")["facts"]
    f["os"] = {"id": "rhel", "version_id": "8.8", "codename": "ootpa", "pretty_name": None}
    plan = decide(f)
    assert plan.strategy == "driver-pin"
    # The family is not read (no ID_LIKE): nothing is said of the roles, and the release is
    # one the knowledge base has no packages for.
    assert not any(OTHER_OS in r for r in plan.risks)
    assert any("lists no driver packages for the release 'ootpa'" in r for r in plan.risks)


def test_an_nccl_setting_needs_no_debian_tools() -> None:
    plan = decide(snapshot("focal-4x4090", RHEL8)["facts"])
    assert plan.strategy == "nccl-profile"
    assert not any(OTHER_OS in r for r in plan.risks)


def test_a_container_image_says_nothing_of_its_hosts_os() -> None:
    f = snapshot("jammy-470-torch23", RHEL8)["facts"]
    f["gathered_in"] = {"where": "container", "evidence": "/.dockerenv"}
    plan = decide(f)
    assert not any(OTHER_OS in r for r in plan.risks)


def test_the_schema_takes_id_like_as_a_list_only() -> None:
    snap = snapshot("jammy-470-torch23", RHEL8)
    validate(snap)
    snap["facts"]["os"]["id_like"] = "fedora"
    with pytest.raises(InvalidInput):
        validate(snap)


def test_a_derivative_gets_no_ubuntu_hwe_kernel() -> None:
    """Linux Mint names the Ubuntu release it is built on; the HWE metapackages and gpufix's
    kernel role are Ubuntu's (review, 2026-12-07: kernel-upgrade planned for Mint)."""
    f = snapshot("bionic-ga-2x3090", MINT)["facts"]
    plan = decide(f)
    option = next(o for o in plan.options if o.strategy == "kernel-upgrade")
    assert not option.feasible and "linuxmint is built on Ubuntu noble" in option.reason


def test_an_ubuntu_release_the_tables_lack_is_not_guessed() -> None:
    """An Ubuntu codename the knowledge base does not list keeps its name: no branch is
    "listed" for it, rather than a package name guessed."""
    f = snapshot("jammy-470-torch23")["facts"]
    f["os"] = dict(f["os"], codename="zesty")
    option = next(o for o in decide(f).options if o.strategy == "driver-pin")
    assert not option.feasible and "zesty" in option.reason


def test_a_rocky_image_still_says_the_hosts_release_is_not_visible() -> None:
    f = snapshot("jammy-470-torch23", RHEL8)["facts"]
    f["gathered_in"] = {"where": "container", "evidence": "/.dockerenv"}
    plan = decide(f)
    assert plan.strategy == "driver-pin"
    assert any("release is not visible from the container" in r for r in plan.risks)


def test_no_apt_index_line_where_there_is_no_apt() -> None:
    """A review (2026-12-07, gpu-operator#375 on CentOS 7): the plan said "not known whether
    the installed driver 470.57.02 is still in an apt index" on a host without apt."""
    rhel = snapshot("jammy-470-torch23", RHEL8)["facts"]
    assert not any("apt index" in r for r in decide(rhel).risks)
    fm = snapshot("a100-fm-mismatch", RHEL8)["facts"]
    fm["fabricmanager"] = {"installed": {"unknown": "not stated"}, "running": False}
    plan = decide(fm)
    assert plan.strategy == "driver-pin" and "not running" in plan.steps[0].description
    assert not any("apt index" in r for r in plan.risks)
    assert any(OTHER_OS in r for r in plan.risks)
