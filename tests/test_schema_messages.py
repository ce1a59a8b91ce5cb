"""A snapshot or verdict written by hand that the schema refuses says what to change in one line.
An outside review (2026-12-07) wrote both from the docs: a driver section missing three keys said
"is not valid under any of the given schemas", and a verdict missing ten required fields took
ten runs, one field named each time (gpufix.schema_check.explain)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from corpus.harness import cases
from corpus.verdict import verdict_for
from gpufix.errors import EXIT_INVALID, InvalidInput
from gpufix.facts import snapshot as F
from gpufix.inputs import schema_errors

HOSTS = Path(__file__).parent / "fixtures" / "hosts"


def snap() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((HOSTS / "bionic-ga-2x3090.json").read_text())
    return loaded


def refused(tmp_path: Path, doc: dict[str, Any]) -> str:
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(InvalidInput) as info:
        F.load_snapshot(path)
    assert info.value.exit_code == EXIT_INVALID and "\n" not in str(info.value)
    return str(info.value)


def test_a_section_missing_keys_names_them_all(tmp_path: Path) -> None:
    d = snap()
    d["facts"]["driver"] = {"kernel_module": "570.133.20"}
    msg = refused(tmp_path, d)
    assert msg.endswith("facts/driver: missing required fields: mismatch, nvml_error, userspace")


def test_a_list_item_missing_keys_is_named_by_its_index(tmp_path: Path) -> None:
    d = snap()
    d["facts"]["gpus"] = [{"index": 0, "name": "NVIDIA A100-SXM4-80GB"}]
    msg = refused(tmp_path, d)
    assert "facts/gpus/0: missing required fields: compute_capability, memory_mib" in msg


def test_a_value_of_no_allowed_form_lists_the_forms(tmp_path: Path) -> None:
    d = snap()
    d["facts"]["gpus"][0]["compute_capability"] = 9.0
    msg = refused(tmp_path, d)
    assert msg.endswith(
        'facts/gpus/0/compute_capability: 9.0 is not {"unknown": "why"} or a string or null'
    )


def test_the_unknown_form_still_says_what_it_lacks(tmp_path: Path) -> None:
    d = snap()
    d["facts"]["driver"] = {"unknown": ""}
    assert "facts/driver/unknown" in refused(tmp_path, d)


def test_a_verdict_missing_fields_names_every_one() -> None:
    case = next(c for c in cases() if c["id"] == "nccl-342-docker-shm")
    verdict, _ = verdict_for(case, 2)
    for key in ("deadline_s", "duration_s", "allreduce", "nccl_log_tail"):
        del verdict[key]
    first = schema_errors(verdict, "probe")[0]
    assert first == (
        "(document): missing required fields: deadline_s, duration_s, allreduce, nccl_log_tail"
    )


def test_an_experiment_s_settings_are_text_as_the_environment_holds_them() -> None:
    case = next(c for c in cases() if c["id"] == "nccl-342-docker-shm")
    verdict, _ = verdict_for(case, 2)
    verdict["experiments"] = [{"id": "shm-off", "env": {"NCCL_SHM_DISABLE": 1}, "gpus": None,
                               "verdict": "healthy", "stalled": None, "error": None,
                               "elapsed_s": 3.0}]  # fmt: skip
    first = schema_errors(verdict, "probe")[0]
    assert first == "experiments/0/env/NCCL_SHM_DISABLE: 1 is not of type 'string'"


def test_what_no_decision_reads_may_be_unknown(tmp_path: Path) -> None:
    """The same review knew the IOMMU translates, or that a fabric manager was not running, and
    not the IOMMU group count, the command line or the installed version: the schema made it
    invent them. Only `iommu.mode` and a known fabric manager version decide anything."""
    from gpufix.facts.host import from_facts

    d = snap()
    d["facts"]["iommu"] = {"mode": "translated", "groups": {"unknown": "not stated"},
                           "cmdline": {"unknown": "not stated"}}  # fmt: skip
    d["facts"]["fabricmanager"] = {"installed": {"unknown": "not stated"}, "running": False}
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(d))
    host = from_facts(F.load_snapshot(path).facts)
    assert host.iommu_mode == "translated"
    assert host.fabricmanager_known is False  # not "not installed"


def test_a_cpu_or_a_kernel_log_count_nobody_stated_may_be_unknown(tmp_path: Path) -> None:
    """A second review (2026-12-07) had to invent a CPU model and `xid: 0` for a thread that
    showed AER lines only: an invented zero reads as "no Xid lines"."""
    from gpufix.facts.host import from_facts

    d = snap()
    d["facts"]["cpu"] = {"vendor": "AuthenticAMD", "model": {"unknown": "not stated"}}
    d["facts"]["kernel_log"] = {"xid": {"unknown": "not stated"}, "nvrm": {"unknown": "not stated"},
                                "aer": 12, "source": {"unknown": "not stated"}}  # fmt: skip
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(d))
    host = from_facts(F.load_snapshot(path).facts)
    assert (host.cpu_vendor, host.xid, host.aer) == ("AuthenticAMD", None, 12)
    d["facts"]["kernel_log"]["aer"] = -1
    assert "kernel_log/aer" in refused(tmp_path, d)


def test_a_gpu_s_name_memory_bus_id_or_uuid_may_be_unknown(tmp_path: Path) -> None:
    """A thread that gives a GPU count and no model (review, 2026-12-07): the schema took only
    null ("known absent"), and a null name was planned as a GPU named "None"."""
    from gpufix.facts.host import from_facts

    d = snap()
    for g in d["facts"]["gpus"]:
        for key in ("name", "pci_bus_id", "memory_mib", "uuid"):
            g[key] = {"unknown": "not in the thread"}
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(d))
    host = from_facts(F.load_snapshot(path).facts)
    assert host.gpu_count == 2 and host.gpu_names == ("", "")
    d["facts"]["gpus"][0]["name"] = None
    assert from_facts(d["facts"]).gpu_names[0] == ""


def test_the_hand_written_verdict_in_the_docs_plans(tmp_path: Path) -> None:
    """docs/probe.md "Writing a verdict by hand": its example passes the schema and decides."""
    from gpufix.engine.decide import decide
    from gpufix.engine.kb import load
    from gpufix.engine.rules import load as load_rules

    text = (Path(__file__).parents[1] / "docs" / "probe.md").read_text()
    part = text[text.index("**Writing a verdict by hand**") : text.index("The verdict's `host` is")]
    blocks = [b.split("\n```", 1)[0] for b in part.split("```json\n")[1:]]
    assert len(blocks) == 2
    for block, host, strategy, row in (
        (blocks[0], "container-shm64m", "container-fix", "shm-off-container"),
        (blocks[1], "bionic-hwe-8xa100", "nccl-profile", "ifname"),
    ):
        verdict = json.loads(block)
        assert schema_errors(verdict, "probe") == []
        facts = json.loads((HOSTS / f"{host}.json").read_text())["facts"]
        plan = decide(facts, verdict, kb=load(), rules=load_rules())
        assert (plan.strategy, plan.extra["decision"]["row"]) == (strategy, row)
        assert plan.extra.get("complete") is not False


def test_a_null_where_text_is_needed_names_the_field() -> None:
    """A review (2026-12-07) read "error: None is not of type 'string'" as the message's own
    prefix: a failed verdict's `error` left null."""
    case = next(c for c in cases() if c["id"] == "nccl-342-docker-shm")
    verdict, _ = verdict_for(case, 2)
    verdict.update(verdict="failed", failed_in={"phase": "pg_init", "ranks": [0, 1]}, error=None)
    first = schema_errors(verdict, "probe")[0]
    assert first == "error: field 'error' is null here, and must be string"


def test_an_os_release_field_nobody_stated_may_be_unknown(tmp_path: Path) -> None:
    """A review (2026-12-07) was refused for `os.pretty_name: {"unknown": ...}`: facts.md says
    most single values may be unknown."""
    from gpufix.facts.host import from_facts

    d = snap()
    d["facts"]["os"] = {"id": "ubuntu", "version_id": "22.04", "codename": "jammy",
                        "pretty_name": {"unknown": "not in the report"}}  # fmt: skip
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(d))
    host = from_facts(F.load_snapshot(path).facts)
    assert (host.os_id, host.codename) == ("ubuntu", "jammy")
    d["facts"]["os"]["codename"] = {"unknown": "not stated"}
    path.write_text(json.dumps(d))
    assert from_facts(F.load_snapshot(path).facts).codename is None
