"""monitoring/: the alert rules pass promtool's checks and unit tests, the dashboard's queries
parse, and every metric they use is one the probe writes (from a real verdict) or one named in
monitoring/README.md with who writes it."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import containers
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
MON = ROOT / "monitoring"
PROBE = ROOT / "roles" / "probe" / "files" / "gpufix_probe.py"
VERDICT = ROOT / "docs" / "device" / "h200-probe-healthy.json"  # a real H200 verdict
TOOL_OUTPUTS = ROOT / "tests" / "fixtures" / "tool_outputs"
# Metrics the rules use that the probe's textfile does not carry: README.md names the writer of
# each. DCGM_FI_DEV_XID_ERRORS: dcgm-exporter's etc/default-counters.csv.
ELSEWHERE = {"DCGM_FI_DEV_XID_ERRORS"}
# Alerts on metrics of other exporters: their firing cases are in the hand-written tests only.
NOT_FROM_THE_PROBE = {"GpuXidErrorDcgm"}
TESTS = ("alerts_test.yml", "alerts_stale_test.yml")
METRIC = re.compile(r"\b(gpufix_[a-z_]+|DCGM_FI_[A-Z_]+)\b")


@pytest.fixture(scope="module")
def promtool() -> str:
    found = shutil.which("promtool") or str(ROOT / ".venv" / "bin" / "promtool")
    if not Path(found).is_file():
        containers.unavailable("promtool missing: bash scripts/install.sh --test installs it")
    return found


def run(*cmd: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cmd, input=stdin, capture_output=True, text=True, timeout=120, cwd=MON, check=False
    )


def probe_program() -> Any:
    spec = importlib.util.spec_from_file_location("gpufix_probe_for_metrics", PROBE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def recorded_verdict(prog: Any, dmesg_lines: int | None = None) -> dict[str, Any]:
    """The real H200 verdict; with the kernel-log counts of a recorded dmesg's first lines."""
    v: dict[str, Any] = json.loads(VERDICT.read_text())
    lines = (TOOL_OUTPUTS / "dmesg_xid_aer.txt").read_text().splitlines()[:dmesg_lines]
    v["facts"]["kernel_log"] = dict(prog.parse_kernel_log("\n".join(lines)), source="dmesg")
    return v


def probe_textfile() -> str:
    prog = probe_program()
    text: str = prog.prometheus(recorded_verdict(prog))
    return text


def dashboard_exprs() -> list[str]:
    doc = json.loads((MON / "grafana" / "gpufix-probe.json").read_text())
    return [t["expr"] for p in doc["panels"] for t in p["targets"]]


def rule_exprs() -> list[str]:
    doc = yaml.safe_load((MON / "alerts.yml").read_text())
    return [r["expr"] for g in doc["groups"] for r in g["rules"]]


def test_rules_pass_promtool_check(promtool: str) -> None:
    r = run(promtool, "check", "rules", "alerts.yml")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS: 7 rules found" in r.stdout


def test_rules_pass_their_unit_tests(promtool: str) -> None:
    r = run(promtool, "test", "rules", *TESTS)
    assert r.returncode == 0, r.stdout + r.stderr


def test_rule_unit_tests_can_fail(promtool: str, tmp_path: Path) -> None:
    """The same tests against rules with one threshold changed must fail."""
    rules = (MON / "alerts.yml").read_text().replace("> 8 * 86400", "> 30 * 86400")
    (tmp_path / "alerts.yml").write_text(rules)
    for name in TESTS:
        shutil.copy(MON / name, tmp_path / name)
    r = subprocess.run(
        [promtool, "test", "rules", *TESTS],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert r.returncode != 0 and "GpufixProbeStale" in r.stdout + r.stderr


def test_the_probe_textfile_passes_promtool_lint(promtool: str) -> None:
    text = probe_textfile()
    assert 'gpufix_probe_verdict{verdict="healthy"} 1.0' in text
    r = run(promtool, "check", "metrics", stdin=text)
    assert r.returncode == 0, r.stdout + r.stderr


def test_every_metric_used_is_written_by_someone() -> None:
    written = set(METRIC.findall(probe_textfile()))
    used = {m for e in rule_exprs() + dashboard_exprs() for m in METRIC.findall(e)}
    assert used - written <= ELSEWHERE, used - written - ELSEWHERE
    readme = (MON / "README.md").read_text()
    for name in ELSEWHERE:
        assert f"`{name}" in readme, name


def test_dashboard_queries_parse(promtool: str, tmp_path: Path) -> None:
    doc: dict[str, Any] = {"groups": [{"name": "dashboard", "rules": []}]}
    for i, expr in enumerate(dashboard_exprs()):
        expr = expr.replace("$instance", ".*")
        doc["groups"][0]["rules"].append({"record": f"gpufix:panel_{i}", "expr": expr})
    path = tmp_path / "dashboard_rules.yml"
    path.write_text(yaml.safe_dump(doc))
    r = run(promtool, "check", "rules", str(path))
    assert r.returncode == 0, r.stdout + r.stderr


def test_dashboard_is_grafana_json_with_a_datasource_variable() -> None:
    doc = json.loads((MON / "grafana" / "gpufix-probe.json").read_text())
    names = [v["name"] for v in doc["templating"]["list"]]
    assert names == ["datasource", "instance"]
    ids = [p["id"] for p in doc["panels"]]
    assert len(ids) == len(set(ids)) >= 6
    for p in doc["panels"]:
        assert p["datasource"]["uid"] == "${datasource}" and p["description"]
        assert all('instance=~"$instance"' in t["expr"] for t in p["targets"])


# ------------------------------------------------ firing cases from the probe's own textfile
SAMPLE = re.compile(r"^(\w+)(\{.*\})? (\S+)$")
HOUR = 3600.0


def series_of(text: str, instance: str) -> dict[str, float]:
    """A textfile's samples as promtool series names, with the label a scrape adds."""
    out = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        assert m, f"not a sample line: {line!r}"
        name, labels, value = m.groups()
        inner = "," + labels[1:-1] if labels else ""
        out[f'{name}{{instance="{instance}"{inner}}}'] = float(value)
    return out


def scraped(instance: str, steps: list[tuple[str, int]]) -> list[dict[str, str]]:
    """input_series for a host whose textfile was each text for so many hourly scrapes."""
    values: dict[str, list[str]] = {}
    done = 0
    for text, n in steps:
        now = series_of(text, instance)
        for key in now:
            values.setdefault(key, ["_"] * done)  # "_": no sample (the series did not exist)
        for key, vals in values.items():
            vals += [repr(now[key]) if key in now else "_"] * n
        done += n
    return [{"series": k, "values": " ".join(v)} for k, v in values.items()]


def firing(alert: str, at: str, *labels: dict[str, str]) -> dict[str, Any]:
    exp = [{"exp_labels": dict(lab, severity=SEVERITY[alert])} for lab in labels]
    return {"eval_time": at, "alertname": alert, "exp_alerts": exp}


SEVERITY = {
    r["alert"]: r["labels"]["severity"]
    for g in yaml.safe_load((MON / "alerts.yml").read_text())["groups"]
    for r in g["rules"]
}


def verdict_cases(prog: Any) -> dict[str, Any]:
    """Hosts whose probe said healthy, hung, degraded, or failed on a driver/library mismatch:
    the real H200 verdict with its outcome changed as the probe would write it."""
    healthy = recorded_verdict(prog)
    hung = dict(healthy, verdict="hung", stalled={"phase": "pg_init", "ranks": [1]})
    degraded = dict(healthy, verdict="degraded")
    # nvidia-smi's words after a driver upgrade without reboot, through the probe's own rules
    nvml = prog.nvml_error_line((TOOL_OUTPUTS / "nvml_mismatch.txt").read_text())
    main = {"verdict": "failed", "stalled": None, "failed_in": {"phase": "cuda_init"}}
    causes = prog.find_causes({"texts": [nvml], "main": main})
    mismatch = dict(healthy, verdict="failed", causes=causes)
    hosts = {"ok": healthy, "hung": hung, "slow": degraded, "mismatch": mismatch}
    series = [s for h, v in hosts.items() for s in scraped(h, [(prog.prometheus(v, 0.0), 12)])]
    return {
        "name": "probe verdicts and causes, as the probe writes them",
        "interval": "1h",
        "input_series": series,
        "alert_rule_test": [
            firing("GpufixProbeHung", "2h", {"instance": "hung"}, {"instance": "mismatch"}),
            firing("GpufixProbeDegraded", "2h", {"instance": "slow"}),
            firing("GpufixDriverLibraryMismatch", "2h", {"instance": "mismatch"}),
            firing("GpufixXidErrorsRising", "2h"),  # steady counts: silent
            firing("GpufixProbeStale", "2h"),
        ],
    }


def kernel_log_cases(prog: Any) -> dict[str, Any]:
    """Two probe runs four hours apart: between them the recorded dmesg gained its Xid and AER
    lines (on one host), or lost them to a reboot (on the other)."""
    before = prog.prometheus(recorded_verdict(prog, dmesg_lines=3), 0.0)
    after = prog.prometheus(recorded_verdict(prog), 4 * HOUR)
    series = scraped("rising", [(before, 4), (after, 8)])
    series += scraped("rebooted", [(after, 4), (before, 8)])
    return {
        "name": "kernel-log counts rising between probe runs; a reboot is silent",
        "interval": "1h",
        "input_series": series,
        "alert_rule_test": [
            firing("GpufixXidErrorsRising", "6h", {"instance": "rising", "kind": "xid"}),
            firing("GpufixAerErrorsRising", "6h", {"instance": "rising", "kind": "aer"}),
            firing("GpufixXidErrorsRising", "11h"),  # six hours after the rise: both runs agree
            firing("GpufixAerErrorsRising", "11h"),
        ],
    }


def stale_cases(prog: Any) -> dict[str, Any]:
    """One host probed at t=0 only, one again at 100 h."""
    first = prog.prometheus(recorded_verdict(prog), 0.0)
    again = prog.prometheus(recorded_verdict(prog), 100 * HOUR)
    series = scraped("old", [(first, 200)]) + scraped("fresh", [(first, 100), (again, 100)])
    return {
        "name": "a textfile older than eight days is stale",
        "interval": "1h",
        "input_series": series,
        "alert_rule_test": [
            firing("GpufixProbeStale", "190h"),
            firing("GpufixProbeStale", "194h", {"instance": "old"}),
        ],
    }


def write_generated(tmp_path: Path, rules: str) -> dict[str, Any]:
    """alerts.yml without annotations (the hand-written tests check those) and the tests."""
    doc = yaml.safe_load(rules)
    for g in doc["groups"]:
        for r in g["rules"]:
            r.pop("annotations", None)
    (tmp_path / "alerts.yml").write_text(yaml.safe_dump(doc))
    prog = probe_program()
    tests = {
        "rule_files": ["alerts.yml"],
        "evaluation_interval": "1h",
        "tests": [verdict_cases(prog), kernel_log_cases(prog), stale_cases(prog)],
    }
    (tmp_path / "generated_test.yml").write_text(yaml.safe_dump(tests, width=1 << 20))
    return tests


def promtool_test(promtool: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [promtool, "test", "rules", "generated_test.yml"],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
        check=False,
    )


def test_every_probe_alert_fires_on_what_the_probe_writes(promtool: str, tmp_path: Path) -> None:
    tests = write_generated(tmp_path, (MON / "alerts.yml").read_text())
    fired = {
        case["alertname"]
        for t in tests["tests"]
        for case in t["alert_rule_test"]
        if case["exp_alerts"]
    }
    assert fired == set(SEVERITY) - NOT_FROM_THE_PROBE
    r = promtool_test(promtool, tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]


def test_generated_cases_catch_a_rule_on_a_metric_the_probe_does_not_write(
    promtool: str, tmp_path: Path
) -> None:
    rules = (MON / "alerts.yml").read_text()
    rules = rules.replace("gpufix_probe_cause{", "gpufix_probe_causes{")
    rules = rules.replace(
        'gpufix_kernel_log_lines{kind="aer"}', 'gpufix_kernel_aer_lines{kind="aer"}'
    )
    write_generated(tmp_path, rules)
    r = promtool_test(promtool, tmp_path)
    out = r.stdout + r.stderr
    assert r.returncode != 0
    assert "GpufixDriverLibraryMismatch" in out and "GpufixAerErrorsRising" in out
    assert "GpufixXidErrorsRising" not in out
