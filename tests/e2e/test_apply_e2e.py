"""gpufix apply end to end on podman containers: real ansible-runner, roles, reboots, probe.

Plans are made by `gpufix plan` from the hosts' real facts (a hand-written plan is refused).
Each test fails if the behaviour it names breaks. Marked integration; minutes each on 2 cores.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest
from lab import Lab
from plans import make_plans

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _apply(lab: Lab, plan: Path, *extra: str) -> tuple[int, dict, str]:
    r = lab.gpufix(
        "apply",
        str(plan),
        "-i",
        str(lab.inventory),
        "--json",
        "--detailed-exitcode",
        *extra,
        timeout=1800,  # a two-host kernel run with reboots and rollbacks, on a loaded machine
    )
    try:
        doc = json.loads(r.stdout) if r.stdout.strip() else {}
    except json.JSONDecodeError:
        pytest.fail(f"stdout is not JSON: {r.stdout[:500]} / {r.stderr[-1500:]}")
    return r.returncode, doc, r.stderr


def _hosts(doc: dict) -> dict[str, dict]:
    return {h["host"]: h for h in doc["hosts"]}


def _journal(lab: Lab, run: str, host: str) -> dict:
    return json.loads((lab.state / "runs" / run / f"{host}.json").read_text())


def _pid1_start(lab: Lab, host: str) -> str:
    return lab.sh(host, "cut -d ' ' -f 22 /proc/1/stat").stdout.strip()


def _uname(lab: Lab, host: str) -> str:
    return lab.sh(host, "gpufix-bootsim-uname").stdout.strip()


def test_kernel_upgrade_fleet_probe_hung_rolls_back_then_retries(make_lab) -> None:
    """plan -> apply -> one-shot reboot -> probe. h1 healthy keeps the new kernel; h2's probe
    hangs after the reboot, so h2 is rolled back to the old kernel. Once h2's environment is
    fixed, applying the same plan again retries h2 in a new run and h1 is left alone."""
    lab = make_lab(
        2,
        setup="kernel,module",
        hostvars={"h2": {"gpufix_probe_pythonpath": "/opt/gpufix-torch-hang"}},
    )
    plan = lab.workdir / "plan.json"
    (p1, _) = make_plans(lab, ["h1", "h2"], "kernel-upgrade", plan)
    assert p1["steps"][0]["vars"]["gpufix_kernel_target"] == "5.4.0-150-generic"
    fleet = ("--allow-reboot", "--batch", "100%", "--no-canary", "--max-fail", "1")
    # a deadline the real torch import meets on a loaded 2-core machine; the hung one never does
    code, doc, err = _apply(lab, plan, *fleet, "--probe-deadline", "90")
    hosts = _hosts(doc)
    assert hosts["h1"]["state"] == "healthy" and hosts["h1"]["rebooted"], err
    h2 = hosts["h2"]
    # the reason first: pytest cuts a long message, and this is the part that says why
    why = f"{h2['state']}/{h2.get('verdict')}: {h2.get('message')} | {err[-800:]}"
    assert h2["state"] == "rolled-back" and h2["verdict"] == "hung", why
    assert code == 5
    assert _uname(lab, "h1") == "5.4.0-150-generic"
    # healthy: finalized, so GRUB's own order (not the one-shot drop-in) picks the next boot
    assert "default" in hosts["h1"]["message"], hosts["h1"]
    dropin = "/etc/default/grub.d/99-gpufix-kernel.cfg"
    assert lab.sh("h1", f"test -e {dropin}", check=False).returncode != 0
    assert _uname(lab, "h2") == "4.15.0-213-generic"
    assert "with Linux 4.15.0-213-generic" in lab.sh("h2", "grub-editenv list").stdout
    rec = _journal(lab, doc["run"], "h2")
    assert rec["rollback"]["ok"] and "linux-generic-hwe-18.04" in rec["rollback"]["remove"]
    assert lab.sh("h2", "dpkg -s linux-generic-hwe-18.04", check=False).returncode != 0
    st = json.loads(lab.gpufix("status", doc["run"], "--json").stdout)
    assert {h["host"]: h["state"] for h in st["hosts"]} == {"h1": "healthy", "h2": "rolled-back"}
    shown = lab.gpufix("status", doc["run"]).stdout
    assert "rolled back" in shown  # h2's verdict before its rollback is not shown as current
    # h2's environment fixed: the same plan retries h2 in a new run; h1 is not touched again
    lab.extra_hostvars["h2"] = {}
    lab.write_inventory()
    before = _pid1_start(lab, "h1")
    code, again, err = _apply(lab, plan, *fleet, "--probe-deadline", "90")
    hosts = _hosts(again)
    assert again["retry_of"] == doc["run"] and again["run"] != doc["run"], err
    assert hosts["h1"]["state"] == "skipped" and doc["run"] in hosts["h1"]["message"]
    assert hosts["h2"]["state"] == "healthy" and hosts["h2"]["rebooted"], (hosts["h2"], err)
    assert code == 2 and _pid1_start(lab, "h1") == before
    assert _uname(lab, "h2") == "5.4.0-150-generic"


def test_reboot_that_never_comes_back_is_reported_unreachable(make_lab) -> None:
    # no restart policy: the reboot powers the "host" off for good
    lab = make_lab(1, setup="kernel,module", restart=False)
    plan = lab.workdir / "plan.json"
    make_plans(lab, ["h1"], "kernel-upgrade", plan)
    # the kernel role's own reboot waits --reboot-timeout, as playbooks/reboot.yml does
    code, doc, err = _apply(lab, plan, "--allow-reboot", "--reboot-timeout", "30")
    h1 = _hosts(doc)["h1"]
    assert code == 4, err
    assert h1["state"] == "unreachable" and "did not come back" in h1["message"]
    rec = _journal(lab, doc["run"], "h1")
    assert rec["rebooted"] and rec["steps"][0]["state"] == "failed" and rec["rollback"] is None


def test_no_nvidia_module_for_the_new_kernel_means_no_reboot(make_lab) -> None:
    lab = make_lab(1, setup="kernel")  # driver 535 with no module for the HWE kernel
    plan = lab.workdir / "plan.json"
    make_plans(lab, ["h1"], "kernel-upgrade", plan)
    before = _pid1_start(lab, "h1")
    packages = _kernel_packages(lab, "h1")
    code, doc, err = _apply(lab, plan, "--allow-reboot")
    h1 = _hosts(doc)["h1"]
    assert code == 1, err
    assert h1["state"] == "rolled-back" and not h1["rebooted"], h1
    assert _pid1_start(lab, "h1") == before  # never rebooted
    assert _uname(lab, "h1") == "4.15.0-213-generic"
    rec = _journal(lab, doc["run"], "h1")
    assert "no NVIDIA kernel module" in rec["steps"][0]["message"]
    # The step had installed the HWE kernel before it refused the reboot. The rollback reads
    # the host back first (apply had not) and removes what the step installed: it used to
    # say rolled-back and leave all of it.
    assert "linux-generic-hwe-18.04" in rec["rollback"]["remove"], rec["rollback"]
    assert _kernel_packages(lab, "h1") == packages


def _kernel_packages(lab: Lab, host: str) -> list[str]:
    out = lab.sh(host, "dpkg-query -W -f='${Package} ${db:Status-Abbrev}\\n' 'linux-*'").stdout
    return sorted(ln.split()[0] for ln in out.splitlines() if ln.split()[1:2] == ["ii"])


def test_dpkg_lock_blocks_the_canary_and_max_fail_stops_the_rollout(make_lab) -> None:
    lab = make_lab(3, setup="driver")
    plan = lab.workdir / "plan.json"
    make_plans(lab, ["h1", "h2", "h3"], "single-gpu", plan)
    # another package run holds dpkg's lock on the canary host
    lab.sh(
        "h1",
        "nohup python3 -c \"import fcntl,time; f=open('/var/lib/dpkg/lock-frontend','w');"
        ' fcntl.lockf(f, fcntl.LOCK_EX); time.sleep(600)" >/dev/null 2>&1 &',
    )
    time.sleep(1)
    code, doc, err = _apply(lab, plan, "--dpkg-wait", "4", "--batch", "1", "--no-verify")
    hosts = _hosts(doc)
    assert code == 1 and doc["stopped"], err
    assert hosts["h1"]["state"] == "blocked" and "lock" in hosts["h1"]["message"]
    for h in ("h2", "h3"):
        assert hosts[h]["state"] == "skipped" and "--max-fail 0" in hosts[h]["message"]
    for h in ("h1", "h2", "h3"):  # nobody was touched
        assert lab.sh(h, "test -e /etc/profile.d/gpufix-single-gpu.sh", check=False).returncode


def test_stale_plan_check_mode_unreachable_host_and_replan(make_lab) -> None:
    lab = make_lab(2, setup="driver")
    plan = lab.workdir / "plan.json"
    make_plans(lab, ["h1", "h2"], "single-gpu", plan)
    # facts change on h1 after the plan was made: refused, nothing applied anywhere
    lab.sh("h1", "printf 'NCCL_DEBUG=INFO\\n' > /etc/nccl.conf")
    code, doc, err = _apply(lab, plan)
    assert code == 3 and doc == {}
    assert "stale plan" in err and "h1: its facts changed" in err and "nccl" in err
    assert len(err.strip().splitlines()[-1]) < 400 and "Traceback" not in err
    lab.sh("h1", "rm /etc/nccl.conf")
    # --check: per-host diffs of what would change, the state called what it is, no journal
    code, doc, err = _apply(lab, plan, "--check")
    hosts = _hosts(doc)
    assert code == 2 and doc["check"] and doc["run"] is None, err
    assert {h["state"] for h in hosts.values()} == {"would-change"}
    diffs = json.dumps(hosts["h1"]["diffs"])
    assert "gpufix-single-gpu.sh" in diffs and "CUDA_VISIBLE_DEVICES" in diffs
    text = lab.gpufix("apply", str(plan), "-i", str(lab.inventory), "--check").stdout
    assert "nothing was changed" in text and "+" in text and "CUDA_VISIBLE_DEVICES" in text
    assert lab.sh("h1", "test -e /etc/profile.d/gpufix-single-gpu.sh", check=False).returncode
    assert not (lab.state / "runs").exists() or not any((lab.state / "runs").iterdir())
    # h2 gone before the run: h1 applied, h2 reported unreachable
    lab.stop("h2")
    code, doc, err = _apply(lab, plan, "--max-fail", "1", "--no-verify")
    hosts = _hosts(doc)
    assert code == 4, err
    assert hosts["h1"]["state"] == "applied" and hosts["h1"]["changed"] >= 1
    assert hosts["h2"]["state"] == "unreachable"
    assert "CUDA_VISIBLE" in lab.sh("h1", "cat /etc/profile.d/gpufix-single-gpu.sh").stdout
    # re-plan on the spot: shown, then refused off a terminal without --yes
    inv = str(lab.inventory)
    r = lab.gpufix("apply", "--strategy", "single-gpu", "h1", "-i", inv, "--json")
    assert r.returncode == 3 and "--yes" in r.stderr and r.stdout == ""


def test_ctrl_c_leaves_a_consistent_journal_and_apply_resumes(make_lab) -> None:
    lab = make_lab(2, setup="driver")
    plan = lab.workdir / "plan.json"
    make_plans(lab, ["h1", "h2"], "single-gpu", plan)
    proc = lab.popen("apply", str(plan), "-i", str(lab.inventory), "--batch", "1")
    runs = lab.state / "runs"
    deadline = time.monotonic() + 120
    started = False
    while time.monotonic() < deadline and not started:
        time.sleep(0.3)
        for f in runs.glob("*/h1.json") if runs.is_dir() else []:
            rec = json.loads(f.read_text())
            started = rec["steps"][0]["state"] == "started"
    assert started, "h1's step never started"
    proc.send_signal(signal.SIGINT)  # what Ctrl-C delivers to the controller
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "resume" in err, err
    run = next(runs.iterdir()).name
    meta = json.loads((runs / run / "run.json").read_text())
    assert meta["state"] == "interrupted"
    h1, h2 = _journal(lab, run, "h1"), _journal(lab, run, "h2")
    assert h1["state"] == "applying" and h1["steps"][0]["state"] == "started"
    assert h2["state"] == "pending"  # nothing started after the signal
    # the same plan again resumes that run: the cut step is run again, h2 goes on
    code, doc, err = _apply(lab, plan, "--batch", "1")
    assert doc["run"] == run and doc["resumed"], err
    assert code == 2 and {h["state"] for h in doc["hosts"]} == {"healthy"}, err
    # and once more: already applied, nothing to do
    code, doc, _ = _apply(lab, plan)
    assert code == 0 and doc["already_applied"]
    # what gpufix itself left on the hosts goes with `gpufix uninstall`
    probe = "/usr/local/lib/gpufix/gpufix_probe.py"
    assert lab.sh("h1", f"test -e {probe}", check=False).returncode == 0
    r = lab.gpufix("uninstall", "h1,h2", "-i", str(lab.inventory), "--check", "--json")
    told = {x["host"]: x for x in json.loads(r.stdout)}
    assert r.returncode == 0 and told["h1"]["state"] == "would-remove", r.stderr
    # each file by name (a review: --check said "changed 1" and nothing of the two files)
    assert told["h1"]["message"] == f"would remove {probe}, /var/lib/gpufix/probe.json"
    assert told["h1"]["changed"] == 2
    r = lab.gpufix("uninstall", "h1,h2", "-i", str(lab.inventory), "--yes", "--json")
    assert r.returncode == 0 and {x["state"] for x in json.loads(r.stdout)} == {"removed"}, r.stderr
    for h in ("h1", "h2"):
        assert lab.sh(h, f"test -e {probe} || test -e /var/lib/gpufix", check=False).returncode
        assert lab.sh(h, "test -e /etc/profile.d/gpufix-single-gpu.sh", check=False).returncode == 0


def test_verify_uses_the_training_environment_the_plan_names(make_lab) -> None:
    """The probe after the change runs with the interpreter the facts found torch in
    (--python-env at plan time), not with python3: here only the training venv has torch; and
    with the job's own settings when given (--probe-job-env)."""
    lab = make_lab(1, setup="driver,train", hostvars={"h1": {"gpufix_probe_pythonpath": ""}})
    plan = lab.workdir / "plan.json"
    train = "/opt/venvs/train/bin/python"
    (p,) = make_plans(lab, ["h1"], "single-gpu", plan, "--python-env", train)
    assert p["verify"]["python"] == train, p["verify"]
    code, doc, err = _apply(lab, plan, "--probe-job-env", "NCCL_SOCKET_IFNAME=^docker0,lo")
    h1 = _hosts(doc)["h1"]
    assert code == 2 and h1["state"] == "healthy" and h1["verdict"] == "healthy", err
    verdict = _journal(lab, doc["run"], "h1")["verdicts"][-1]
    assert verdict["job_env"] == {"NCCL_SOCKET_IFNAME": "^docker0,lo"}, verdict
