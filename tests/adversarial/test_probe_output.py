"""`gpufix probe HOST --json` prints {host: verdict}; `gpufix plan --probe-verdict` takes that file
for one host as it takes a bare verdict. Several hosts' verdicts, or a host key that is not a
name, give one line and exit 3: which verdict belongs to the host is never guessed."""

from __future__ import annotations

import json
from pathlib import Path

from .conftest import ROOT, CliRun

H200 = ROOT / "docs" / "device" / "h200-probe-healthy.json"
SNAP = ROOT / "tests" / "fixtures" / "hosts" / "bionic-ga-2x3090.json"


def _verdict() -> dict:
    v = json.loads(H200.read_text())
    v["facts"] = {}  # the H200's own readings are not this host's
    return v


def _plan(cli: CliRun, tmp_path: Path, doc: object) -> tuple[int, str, str]:
    path = tmp_path / "probe.json"
    path.write_text(json.dumps(doc))
    return cli("plan", "x", "--facts", str(SNAP), "--probe-verdict", str(path), "--json")


def test_one_hosts_probe_output_is_a_verdict(cli: CliRun, tmp_path: Path) -> None:
    bare = _plan(cli, tmp_path, _verdict())
    wrapped = _plan(cli, tmp_path, {"gpu01": _verdict()})
    assert bare[0] == wrapped[0] == 0
    (a,), (b,) = json.loads(bare[1])["plans"], json.loads(wrapped[1])["plans"]
    assert a["strategy"] == b["strategy"] and a["probe_verdict"] == b["probe_verdict"] == "healthy"


def test_several_hosts_are_refused_by_name(cli: CliRun, tmp_path: Path) -> None:
    code, _, err = _plan(cli, tmp_path, {"gpu01": _verdict(), "gpu02\n$(reboot)": _verdict()})
    assert code == 3 and len(err.strip().splitlines()) == 1
    assert "verdicts of 2 hosts" in err and "gpu01" in err


def test_a_host_whose_value_is_not_a_verdict_is_a_schema_error(cli: CliRun, tmp_path: Path) -> None:
    code, _, err = _plan(
        cli, tmp_path, {"gpu01": {"verdict": "healthy", "{{ lookup('pipe', 'id') }}": 1}}
    )
    assert code == 3 and len(err.strip().splitlines()) == 1 and "probe verdict file" in err


def _group(cli: CliRun, tmp_path: Path, verdict: dict) -> tuple[int, str, str]:
    path = tmp_path / "probe.json"
    path.write_text(json.dumps(verdict))
    return cli("plan", "bionic", "--probe-verdict", str(path), "--json")


def test_a_group_gives_the_verdict_only_to_the_host_it_was_recorded_on(
    cli: CliRun, tmp_path: Path
) -> None:
    code, out, _ = _group(cli, tmp_path, {**_verdict(), "host": "host02"})
    assert code == 0
    got = {p["host"]: p["probe_verdict"] for p in json.loads(out)["plans"]}
    assert got["host02"] == "healthy"
    assert [h for h, v in got.items() if v is not None] == ["host02"], got


def test_a_verdict_from_no_planned_host_is_refused_for_a_group(cli: CliRun, tmp_path: Path) -> None:
    code, out, err = _group(cli, tmp_path, {**_verdict(), "host": "gpu77 $(reboot)"})
    assert code == 3 and out == "" and len(err.strip().splitlines()) == 1
    assert "none of the 4 hosts planned" in err and "gpu77" in err
    # a host name with a line break is refused by the schema before any binding (2026-12-06)
    code, out, err = _group(cli, tmp_path, {**_verdict(), "host": "gpu77\n$(reboot)"})
    assert code == 3 and out == "" and len(err.strip().splitlines()) == 1
    assert "host:" in err and "gpu77" in err


def test_a_lone_host_takes_a_verdict_recorded_under_another_name_and_says_so(
    cli: CliRun, tmp_path: Path
) -> None:
    code, out, _ = _plan(cli, tmp_path, {**_verdict(), "host": "gpu77"})
    (plan,) = json.loads(out)["plans"]
    assert code == 0 and plan["probe_verdict"] == "healthy"
    assert any("recorded on 'gpu77'" in r for r in plan["risks"]), plan["risks"]
    code, out, _ = _plan(cli, tmp_path, {**_verdict(), "host": "bionic-ga-2x3090"})
    (plan,) = json.loads(out)["plans"]
    assert not any("probe verdict was recorded on" in r for r in plan["risks"])


def test_a_multi_node_verdict_goes_to_every_host_it_ran_on(cli: CliRun, tmp_path: Path) -> None:
    v = {**_verdict(), "scope": "multi-node", "host": "bionic", "hosts": ["host01", "host02"]}
    v.update(failed_layer=None, failed_hosts=[])
    code, out, _ = _group(cli, tmp_path, v)
    got = {p["host"]: p["probe_verdict"] for p in json.loads(out)["plans"]}
    assert code == 0 and got["host01"] == got["host02"] == "healthy"
    assert got["host05"] is None and got["host09"] is None


def test_a_saved_probe_output_binds_by_the_inventory_name_not_the_hostname(
    cli: CliRun, tmp_path: Path
) -> None:
    """`gpufix probe host02 --json` prints {host02: verdict}; the program's `host` is the
    machine's hostname (gpu-box-7 here), which inventories seldom use."""
    path = tmp_path / "probe.json"
    path.write_text(json.dumps({"host02": {**_verdict(), "host": "gpu-box-7"}}))
    code, out, _ = cli("plan", "bionic", "--probe-verdict", str(path), "--json")
    got = {p["host"]: p["probe_verdict"] for p in json.loads(out)["plans"]}
    assert code == 0 and got["host02"] == "healthy"
    assert [h for h, v in got.items() if v] == ["host02"]


def test_a_verdict_of_a_host_not_reached_goes_to_no_other_host() -> None:
    from gpufix.errors import InvalidInput
    from gpufix.planning import bind_verdict

    v = {**_verdict(), "host": "gpu02"}
    assert bind_verdict(["gpu01"], v, failed=["gpu02"]) == {}  # gpu02's, and gpu02 failed
    assert bind_verdict(["gpu01"], v) == {"gpu01": v}  # a lone host: read, with a risk line
    try:
        bind_verdict(["gpu01"], {**v, "host": "gpu77"}, failed=["gpu02"])
    except InvalidInput as exc:
        assert "none of the 2 hosts planned" in str(exc)
    else:
        raise AssertionError("a verdict of no targeted host was bound")


def test_a_hostile_inventory_host_is_only_ever_text(cli: CliRun, tmp_path: Path) -> None:
    """`inventory_host` comes from a file: it only names hosts, in one line of text; a
    non-string is a schema error (exit 3), never a host pattern or a command."""
    hostile = "gpu77{{lookup('pipe','id')}}$(reboot)"  # one printable word: a name, as text
    code, out, _ = _plan(cli, tmp_path, {**_verdict(), "inventory_host": hostile})
    (plan,) = json.loads(out)["plans"]
    (risk,) = [r for r in plan["risks"] if "verdict was recorded on" in r]
    assert code == 0 and "\n" not in risk and "uid=" not in out
    # with a line break or a space it is no host name at all: the schema refuses it (2026-12-06)
    for bad in ("gpu77\n{{ lookup('pipe', 'id') }}$(reboot)", "gpu77 $(reboot)"):
        code, out, err = _plan(cli, tmp_path, {**_verdict(), "inventory_host": bad})
        assert code == 3 and out == "" and len(err.strip().splitlines()) == 1
        assert "inventory_host" in err and "uid=" not in err
    code, out, err = _plan(cli, tmp_path, {**_verdict(), "inventory_host": ["host01"]})
    assert code == 3 and out == "" and len(err.strip().splitlines()) == 1


def test_a_verdict_of_unbounded_size_is_refused(cli: CliRun, tmp_path: Path) -> None:
    """A review (2026-12-06): 1.8 million stalled ranks (19 s, 256 MB) or a 5 MB error went
    into the plan whole, and a world size of 1e29 passed. The schema bounds them."""
    hung = {**_verdict(), "verdict": "hung", "error": "stalled"}
    for bad in (
        {**hung, "stalled": {"phase": "barrier", "ranks": list(range(70000))}},
        {**_verdict(), "world_size": 10**29},
        {**_verdict(), "verdict": "failed", "error": "x" * 70000},
    ):
        code, out, err = _plan(cli, tmp_path, bad)
        assert code == 3 and out == "" and len(err.strip().splitlines()) == 1, err[:300]
    # a long error within the bound is one line of the plan, cut short
    code, out, _ = _plan(cli, tmp_path, {**_verdict(), "verdict": "failed", "error": "e\n" * 5000})
    (plan,) = json.loads(out)["plans"]
    (failed,) = [f for f in plan["findings"] if f["id"] == "probe-failed"]
    assert code == 0 and "\n" not in failed["message"] and len(failed["message"]) <= 2000
