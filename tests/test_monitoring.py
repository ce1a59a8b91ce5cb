"""monitoring/: the alert rules pass promtool's checks and unit tests, the dashboard's queries
parse, and every metric they use is one the probe writes (from a real verdict) or one named in
monitoring/README.md with who writes it."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
MON = ROOT / "monitoring"
PROBE = ROOT / "roles" / "probe" / "files" / "gpufix_probe.py"
VERDICT = ROOT / "docs" / "device" / "h200-probe-healthy.json"  # a real H200 verdict
# Metrics the rules use that the probe's textfile does not carry (yet): README.md names the
# writer of each. DCGM_FI_DEV_XID_ERRORS: dcgm-exporter's etc/default-counters.csv.
ELSEWHERE = {"DCGM_FI_DEV_XID_ERRORS", "gpufix_probe_cause", "gpufix_kernel_log_lines"}
TESTS = ("alerts_test.yml", "alerts_stale_test.yml")
METRIC = re.compile(r"\b(gpufix_[a-z_]+|DCGM_FI_[A-Z_]+)\b")


@pytest.fixture(scope="module")
def promtool() -> str:
    found = shutil.which("promtool") or str(ROOT / ".venv" / "bin" / "promtool")
    if not Path(found).is_file():
        if os.environ.get("GPUFIX_REQUIRE_PODMAN"):  # scripts/test.sh: every tool must be here
            pytest.fail("promtool missing: bash scripts/install.sh --test installs it")
        pytest.skip("promtool missing: bash scripts/install.sh --test installs it")
    return found


def run(*cmd: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cmd, input=stdin, capture_output=True, text=True, timeout=120, cwd=MON, check=False
    )


def probe_textfile() -> str:
    spec = importlib.util.spec_from_file_location("gpufix_probe_for_metrics", PROBE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    text: str = module.prometheus(json.loads(VERDICT.read_text()))
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
