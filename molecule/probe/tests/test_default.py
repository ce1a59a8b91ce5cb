"""probe on Debian 12 without torch or a GPU: the program ships and its verdict file parses."""

import hashlib
import json
from pathlib import Path

import jsonschema

ROOT = Path(__file__).resolve().parents[3]
PROGRAM = ROOT / "roles/probe/files/gpufix_probe.py"
SCHEMA = ROOT / "controller/gpufix/schemas/probe.schema.json"


def test_program_shipped_unchanged(host):
    f = host.file("/usr/local/lib/gpufix/gpufix_probe.py")
    assert f.mode == 0o755
    assert f.sha256sum == hashlib.sha256(PROGRAM.read_bytes()).hexdigest()


def test_last_verdict_on_the_host_is_valid(host):
    # side_effect ends with a --cpu run: without torch it fails in import_torch.
    verdict = json.loads(host.file("/var/lib/gpufix/probe.json").content_string)
    jsonschema.validate(verdict, json.loads(SCHEMA.read_text()))
    assert verdict["verdict"] == "failed"
    assert verdict["failed_in"]["phase"] == "import_torch"
    assert verdict["backend"] == "gloo"
    # The program found no torch before starting a worker and said so (issue 15).
    assert [c["id"] for c in verdict["causes"]] == ["torch-missing"]
    assert verdict["phases"] == [] and verdict["experiments"] == []


def test_no_probe_left_running(host):
    # [g] keeps pgrep from matching the shell that runs it.
    assert host.run("pgrep -f '[g]pufix_probe.py'").rc == 1
    assert host.run("pgrep -f '[s]leep 600'").rc == 1


def test_textfile_of_the_killed_probe_replaced_the_last_one(host):
    # converge's program wrote cause torch-missing; side_effect's hanging program was killed and
    # the role wrote its made verdict's textfile (--prom-from) over it.
    d = "/var/lib/gpufix-test-textfile"
    text = host.file(d + "/gpufix_probe.prom").content_string
    assert 'gpufix_probe_verdict{verdict="failed"} 1.0' in text
    assert 'gpufix_probe_cause{cause="torch-missing"} 0.0' in text
    assert "gpufix_probe_last_run_timestamp_seconds " in text
    assert host.file(d + "/gpufix_probe.prom").mode == 0o644
    assert host.run("ls -A " + d).stdout.split() == ["gpufix_probe.prom"]  # no temp file left
