"""The apply lock on the host itself (playbooks/host_lock.yml, gpufix.apply.hostlock), end to end
on podman containers: another controller's lock blocks the host, this controller's own stale
one is taken over, and the lock is gone when the run ends. Marked integration."""

from __future__ import annotations

import json
import socket

import pytest
from lab import Lab
from plans import make_plans

pytestmark = [pytest.mark.integration, pytest.mark.slow]

LOCK = "/var/lib/gpufix/apply.lock"


def _apply(lab: Lab, *extra: str) -> tuple[int, dict, str]:
    r = lab.gpufix(
        "apply", str(lab.workdir / "plan.json"), "-i", str(lab.inventory), "--json",
        "--no-verify", "--max-fail", "1", *extra, timeout=1200,
    )  # fmt: skip
    return r.returncode, json.loads(r.stdout) if r.stdout.strip() else {}, r.stderr


def _put(lab: Lab, host: str, record: dict) -> None:
    text = json.dumps(record).replace("'", "")
    lab.sh(host, f"mkdir -p /var/lib/gpufix && printf '%s' '{text}' > {LOCK}")


def _profile(lab: Lab, host: str) -> bool:
    return lab.sh(host, "test -e /etc/profile.d/gpufix-single-gpu.sh", check=False).returncode == 0


def test_another_controllers_lock_blocks_the_host_until_forced(make_lab) -> None:
    """A review (2026-12-06, H2): the lock lived in the controller's state directory only, so a
    second bastion or an AWX job beside the CLI could change the same host at the same time."""
    lab = make_lab(2, setup="driver")
    make_plans(lab, ["h1", "h2"], "single-gpu", lab.workdir / "plan.json")
    other = {"token": "a" * 32, "owner": "bastion2:/srv/gpufix", "pid": 4242, "since": "earlier"}
    _put(lab, "h1", other)
    # h2 holds a record of this controller from a run that died: taken over, not obeyed
    mine = {"token": "b" * 32, "owner": f"{socket.gethostname()}:{lab.state}", "pid": "0"}
    _put(lab, "h2", {**other, **mine})  # pid 0: no process, so the run is gone
    # a probe leaves the held host alone: its verdict would describe a host half-changed
    r = lab.gpufix("probe", "h1,h2", "-i", str(lab.inventory), "--json", timeout=600)
    probed = json.loads(r.stdout)
    assert probed["h1"]["held"] is True and "bastion2:/srv/gpufix" in probed["h1"]["error"]
    assert "held" not in probed["h2"] and probed["h2"]["verdict"] == "not-applicable", r.stderr
    assert r.returncode == 1 and json.loads(lab.sh("h1", f"cat {LOCK}").stdout) == other
    # a dry run takes no lock, but its diffs mean nothing while another run changes the host
    code, doc, err = _apply(lab, "--check")
    hosts = {h["host"]: h for h in doc["hosts"]}
    assert code == 1 and hosts["h1"]["state"] == "blocked", err
    assert "bastion2" in hosts["h1"]["message"] and hosts["h2"]["state"] == "would-change"
    code, doc, err = _apply(lab)
    hosts = {h["host"]: h for h in doc["hosts"]}
    assert code == 1, err
    assert hosts["h1"]["state"] == "blocked", hosts["h1"]
    assert "bastion2:/srv/gpufix (pid 4242" in hosts["h1"]["message"]
    assert "--force host-lock" in hosts["h1"]["message"]
    assert not _profile(lab, "h1")  # nothing changed on the held host
    assert json.loads(lab.sh("h1", f"cat {LOCK}").stdout) == other  # and its lock left alone
    assert hosts["h2"]["state"] == "applied" and _profile(lab, "h2")
    assert lab.sh("h2", f"test -e {LOCK}", check=False).returncode != 0  # released at the end
    # the operator knows bastion2's run is gone: the same plan again, forced, finishes h1
    code, doc, err = _apply(lab, "--force", "host-lock")
    hosts = {h["host"]: h for h in doc["hosts"]}
    assert code == 0 and hosts["h1"]["state"] == "applied", err
    assert _profile(lab, "h1") and lab.sh("h1", f"test -e {LOCK}", check=False).returncode != 0
