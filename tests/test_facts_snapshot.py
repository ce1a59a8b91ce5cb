"""The snapshot model: load / validate / save, the unknown convention and the recorded hosts."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from gpufix.errors import EXIT_INVALID, InvalidInput
from gpufix.facts import snapshot as F

HOSTS = Path(__file__).parent / "fixtures" / "hosts"
HOST_FILES = sorted(HOSTS.glob("*.json"))
EXPECTED_HOSTS = {
    "bionic-ga-2x3090",
    "bionic-hwe-8xa100",
    "focal-4x4090",
    "jammy-470-torch23",
    "bionic-single-gpu",
    "nogpu",
    "container-shm64m",
    "a100-fm-mismatch",
    "bionic-mismatch",
    "noble-4x5090",
    "jammy-4xp100-torch28",
    "container-acs-4xada",
}


def load(name: str) -> F.Snapshot:
    return F.load_snapshot(HOSTS / f"{name}.json")


def doc(name: str = "bionic-ga-2x3090") -> dict[str, Any]:
    return json.loads((HOSTS / f"{name}.json").read_text())


def test_every_expected_host_is_recorded() -> None:
    assert {p.stem for p in HOST_FILES} == EXPECTED_HOSTS


@pytest.mark.parametrize("path", HOST_FILES, ids=lambda p: p.stem)
def test_recorded_host_is_schema_valid(path: Path) -> None:
    snap = F.load_snapshot(path)
    assert snap.host == path.stem
    assert F.schema_errors(snap.to_doc()) == []


def test_docs_schema_is_the_package_schema() -> None:
    link = Path(__file__).parents[1] / "docs" / "facts.schema.json"
    assert link.is_symlink() and not os.path.isabs(os.readlink(link))
    assert json.loads(link.read_text()) == F.schema()


# Keys added after module 1.0.0: optional, so snapshots saved by an older module stay readable.
ADDED_SINCE_1_0 = {"gathered_in"}


def test_schema_lists_exactly_the_module_keys() -> None:
    from gpufix.facts.local import load_module

    facts = F.schema()["properties"]["facts"]
    assert set(facts["properties"]) == set(load_module().FACT_KEYS)
    assert set(facts["required"]) == set(load_module().FACT_KEYS) - ADDED_SINCE_1_0


def test_recorded_hosts_say_what_the_brief_says() -> None:
    ga = load("bionic-ga-2x3090")
    assert F.get(ga, "kernel.running") == "4.15.0-213-generic"
    assert F.get(ga, "kernel.hwe.installed") is None
    assert F.get(ga, "kernel.hwe.candidate", "").startswith("5.4.0")
    assert F.get(ga, "python_envs.0.packages.torch") == "1.12.1+cu113"
    hwe = load("bionic-hwe-8xa100")
    assert len(F.get(hwe, "gpus")) == 8 and F.get(hwe, "topology.worst") == "NV12"
    assert F.get(hwe, "fabricmanager") == {"installed": "515.105.01", "running": True}
    plx = load("focal-4x4090")
    assert F.get(plx, "pcie.gpus_behind_switch") is True
    assert all(b["acs_enabled"] for b in F.get(plx, "pcie.bridges") if b["above_gpu"])
    assert F.get(plx, "iommu.cmdline.intel_iommu") == "on"
    assert F.get(load("nogpu"), "gpus") == []
    assert F.get(load("nogpu"), "driver.kernel_module", "none") == "none"
    box = load("container-shm64m")
    assert F.get(box, "shm.size_bytes") == 64 * 1024**2
    assert F.get(box, "containers.ipc_host") is False
    fm = load("a100-fm-mismatch")
    assert F.get(fm, "fabricmanager.installed") != F.get(fm, "driver.kernel_module")
    mm = load("bionic-mismatch")
    assert F.get(mm, "driver.mismatch") is True
    assert "Driver/library version mismatch" in F.get(mm, "driver.nvml_error")
    assert F.is_unknown(mm.facts["gpus"])


def test_get_dotted_paths_and_unknowns() -> None:
    facts = {
        "driver": {"kernel_module": {"unknown": "no NVIDIA kernel module loaded"}},
        "gpus": [{"name": "A"}, {"name": "B"}],
        "topology": {"unknown": "nvidia-smi: not found"},
        "kernel": {"hwe": {"installed": None}},
    }
    assert F.get(facts, "driver.kernel_module", "?") == "?"
    assert F.get(facts, "gpus.1.name") == "B"
    assert F.get(facts, "gpus.-1.name") == "B"
    assert F.get(facts, "gpus.5.name", "none") == "none"
    assert F.get(facts, "gpus.name", "x") == "x"
    assert F.get(facts, "topology.worst", "n/a") == "n/a"
    assert F.get(facts, "missing.key", 7) == 7
    assert F.get(facts, "kernel.hwe.installed", "d") is None


def test_known_and_is_unknown() -> None:
    assert F.is_unknown({"unknown": "timeout after 10s"})
    assert not F.is_unknown({"unknown": "x", "other": 1})
    assert not F.is_unknown(None) and not F.is_unknown([])
    assert F.known({"unknown": "x"}, 3) == 3
    assert F.known("2.27") == "2.27"
    assert F.unknown_reason({"unknown": "why"}) == "why"
    assert F.unknown_reason("2.27") is None


def test_save_then_load_round_trip(tmp_path: Path) -> None:
    snap = load("focal-4x4090")
    out = tmp_path / "f.json"
    F.save_snapshot(snap, out)
    assert F.load_snapshot(out) == snap
    assert [p.name for p in tmp_path.iterdir()] == ["f.json"]


def test_save_refuses_invalid_snapshot(tmp_path: Path) -> None:
    bad = F.Snapshot(host="h", gathered_at=F.now_utc(), facts={"os": {}})
    with pytest.raises(InvalidInput):
        F.save_snapshot(bad, tmp_path / "f.json")
    assert not (tmp_path / "f.json").exists()


def one_line_error(path: Path) -> str:
    with pytest.raises(InvalidInput) as info:
        F.load_snapshot(path)
    msg = str(info.value)
    assert "\n" not in msg and str(path) in msg and len(msg) < 400
    assert info.value.exit_code == EXIT_INVALID
    return msg


def write(tmp_path: Path, content: str) -> Path:
    p = tmp_path / "snap.json"
    p.write_text(content)
    return p


def test_load_errors_are_one_line_and_name_the_file(tmp_path: Path) -> None:
    assert "No such file" in one_line_error(tmp_path / "absent.json")
    assert "not JSON" in one_line_error(write(tmp_path, "{not json"))
    assert "expected a JSON object" in one_line_error(write(tmp_path, "[1, 2]"))
    d = doc()
    d["format"] = "gpufix-probe"
    assert "format is 'gpufix-probe'" in one_line_error(write(tmp_path, json.dumps(d)))
    d = doc()
    d["version"] = 2
    assert "version 2" in one_line_error(write(tmp_path, json.dumps(d)))


def test_load_reports_first_schema_problem(tmp_path: Path) -> None:
    d = doc()
    del d["facts"]["gpus"]
    assert "'gpus' is a required property" in one_line_error(write(tmp_path, json.dumps(d)))
    d = doc()
    d["facts"]["shm"] = {"size_bytes": "lots", "path": "/dev/shm"}
    assert "facts/shm" in one_line_error(write(tmp_path, json.dumps(d)))
    d = doc()
    d["facts"]["driver"] = {"unknown": ""}
    one_line_error(write(tmp_path, json.dumps(d)))


def test_load_rejects_binary(tmp_path: Path) -> None:
    p = tmp_path / "snap.json"
    p.write_bytes(b"\xff\xfe\x00garbage")
    one_line_error(p)


def test_from_module_result_accepts_ansible_facts() -> None:
    facts = doc()["facts"]
    snap = F.from_module_result("gpu01", {"gpufix": facts})
    assert snap.host == "gpu01" and snap.facts == facts
    assert F.from_module_result("gpu01", facts).facts == facts
    with pytest.raises(InvalidInput, match="host gpu01"):
        F.from_module_result("gpu01", {"gpufix": {"os": "x"}})
    with pytest.raises(InvalidInput, match="no gpufix facts"):
        F.from_module_result("gpu01", {"gpufix": ["x"]})


@pytest.mark.parametrize("value", ["{{ lookup('pipe', 'id') }}", "true", 1, None])
def test_automatic_reboot_is_a_boolean_or_refused(value: object) -> None:
    doc = json.loads((HOSTS / "bionic-mismatch.json").read_text())
    doc["facts"]["unattended_upgrades"]["automatic_reboot"] = value
    assert any("automatic_reboot" in e for e in F.schema_errors(doc))


def _gpus(n: int) -> dict[str, Any]:
    d = doc("focal-4x4090")
    f = d["facts"]
    f["gpus"] = [dict(f["gpus"][0], index=i, uuid=f"GPU-{i}") for i in range(n)]
    names = [f"GPU{i}" for i in range(n)]
    f["topology"]["matrix"] = {a: {b: "PXB" for b in names if b != a} for a in names}
    f["p2p"] = {"read": {a: {b: "OK" for b in names if b != a} for a in names}}
    return d


def test_the_schema_bounds_what_a_host_can_make_gpufix_do() -> None:
    """No bound on lists and matrices let a 12 MB snapshot (600x600 P2P matrix) cost `gpufix
    diff --all` 161 s and 2 GB (attack review, 2026-12-06). 128 GPUs per OS is past any board
    NVIDIA sells (HGX: 8, DGX-2: 16); the error names the size, not the first 200 characters."""
    F.validate(_gpus(128))
    with pytest.raises(InvalidInput) as exc:
        F.validate(_gpus(129))
    assert "of 129 " in str(exc.value) and len(str(exc.value)) < 300  # the first of three
    one = _gpus(4)
    one["facts"]["gpus"] *= 40
    with pytest.raises(InvalidInput, match="facts/gpus: a list of 160 items is too long"):
        F.validate(one)
