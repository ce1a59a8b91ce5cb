"""gpufix apply end to end on podman containers: real ansible-runner, roles, reboots, probe.

Each test fails if the behaviour it names breaks. Marked integration; ~8 minutes on 2 cores.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest
from gpufix.engine.plan import Step
from lab import Lab
from plans import KERNEL_NO_MODULE_STEP, KERNEL_STEP, NCCL_STEP, make_plans

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _apply(lab: Lab, plan: Path, *extra: str) -> tuple[int, dict, str]:
    r = lab.gpufix(
        "apply",
        str(plan),
        "-i",
        str(lab.inventory),
        "--yes",
        "--json",
        "--detailed-exitcode",
        *extra,
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


def test_kernel_upgrade_fleet_probe_hung_rolls_back(make_lab) -> None:
    """Plan -> apply -> one-shot reboot -> probe. h1 healthy keeps the new kernel; h2's probe
    hangs after the reboot, so h2 is rolled back to the old kernel. Re-applying refuses."""
    lab = make_lab(
        2, setup="kernel", hostvars={"h2": {"gpufix_probe_pythonpath": "/opt/gpufix-torch-hang"}}
    )
    plan = lab.workdir / "plan.json"
    make_plans(["h1", "h2"], lab.inventory, "kernel-upgrade", [KERNEL_STEP], plan)
    code, doc, err = _apply(
        lab,
        plan,
        "--allow-reboot",
        "--batch",
        "100%",
        "--no-canary",
        "--max-fail",
        "1",
        "--probe-deadline",
        "20",
    )
    hosts = _hosts(doc)
    assert hosts["h1"]["state"] == "healthy" and hosts["h1"]["rebooted"], err
    assert hosts["h2"]["state"] == "rolled-back" and hosts["h2"]["verdict"] == "hung", err
    assert code == 5
    assert lab.sh("h1", "gpufix-bootsim-uname").stdout.strip() == "5.4.0-150-generic"
    assert lab.sh("h2", "gpufix-bootsim-uname").stdout.strip() == "4.15.0-213-generic"
    assert "with Linux 4.15.0-213-generic" in lab.sh("h2", "grub-editenv list").stdout
    rec = _journal(lab, doc["run"], "h2")
    assert rec["rollback"]["ok"] and "linux-image-5.4.0-150-generic" in rec["rollback"]["remove"]
    assert lab.sh("h2", "dpkg -s linux-image-5.4.0-150-generic", check=False).returncode != 0
    # the same plan again: h1 is done, h2 was rolled back -> a clear refusal, nothing run
    again = lab.gpufix("apply", str(plan), "-i", str(lab.inventory), "--yes")
    assert again.returncode == 1 and "cannot resume" in again.stderr and "h2" in again.stderr
    st = lab.gpufix("status", doc["run"], "--json")
    assert {h["host"]: h["state"] for h in json.loads(st.stdout)["hosts"]} == {
        "h1": "healthy",
        "h2": "rolled-back",
    }


def test_reboot_that_never_comes_back_is_reported_unreachable(make_lab) -> None:
    # no restart policy: the reboot powers the "host" off for good
    lab = make_lab(
        1, setup="kernel", hostvars={"h1": {"gpufix_kernel_reboot_timeout": 20}}, restart=False
    )
    plan = lab.workdir / "plan.json"
    make_plans(["h1"], lab.inventory, "kernel-upgrade", [KERNEL_STEP], plan)
    code, doc, err = _apply(lab, plan, "--allow-reboot")
    h1 = _hosts(doc)["h1"]
    assert code == 4, err
    assert h1["state"] == "unreachable" and "did not come back" in h1["message"]
    rec = _journal(lab, doc["run"], "h1")
    assert rec["rebooted"] and rec["steps"][0]["state"] == "failed" and rec["rollback"] is None


def test_no_nvidia_module_for_the_new_kernel_means_no_reboot(make_lab) -> None:
    lab = make_lab(1, setup="kernel")
    plan = lab.workdir / "plan.json"
    make_plans(["h1"], lab.inventory, "kernel-upgrade", [KERNEL_NO_MODULE_STEP], plan)
    before = _pid1_start(lab, "h1")
    code, doc, err = _apply(lab, plan, "--allow-reboot")
    h1 = _hosts(doc)["h1"]
    assert code == 1, err
    assert h1["state"] in ("failed", "rolled-back") and not h1["rebooted"], h1
    assert _pid1_start(lab, "h1") == before  # never rebooted
    assert lab.sh("h1", "gpufix-bootsim-uname").stdout.strip() == "4.15.0-213-generic"
    rec = _journal(lab, doc["run"], "h1")
    assert "no NVIDIA kernel module" in rec["steps"][0]["message"]


def test_dpkg_lock_blocks_the_canary_and_max_fail_stops_the_rollout(make_lab) -> None:
    lab = make_lab(3)
    plan = lab.workdir / "plan.json"
    make_plans(["h1", "h2", "h3"], lab.inventory, "nccl-profile", [NCCL_STEP], plan)
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
        assert lab.sh(h, "test -e /etc/nccl.conf", check=False).returncode != 0


def test_unreachable_host_before_the_run_and_stale_plan(make_lab) -> None:
    lab = make_lab(2)
    plan = lab.workdir / "plan.json"
    make_plans(["h1", "h2"], lab.inventory, "nccl-profile", [NCCL_STEP], plan)
    # facts change on h1 after the plan was made: refused, nothing applied anywhere
    lab.sh("h1", "printf 'NCCL_DEBUG=INFO\\n' > /etc/nccl.conf")
    code, doc, err = _apply(lab, plan)
    assert code == 3 and doc == {}
    assert "stale plan" in err and "h1: its facts changed" in err and "nccl" in err
    assert len(err.strip().splitlines()[-1]) < 400 and "Traceback" not in err
    lab.sh("h1", "rm /etc/nccl.conf")
    # h2 gone before the run: h1 applied, h2 reported unreachable
    lab.stop("h2")
    code, doc, err = _apply(lab, plan, "--max-fail", "1", "--no-verify")
    hosts = _hosts(doc)
    assert code == 4, err
    assert hosts["h1"]["state"] == "applied" and hosts["h1"]["changed"] >= 1
    assert hosts["h2"]["state"] == "unreachable"
    assert "NCCL_P2P_DISABLE=1" in lab.sh("h1", "cat /etc/nccl.conf").stdout
    # re-plan on the spot: shown, then refused off a terminal without --yes
    lab.sh("h1", "DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nvidia-driver-535")
    inv = str(lab.inventory)
    r = lab.gpufix("apply", "--strategy", "single-gpu", "h1", "-i", inv, "--json")
    assert r.returncode == 3 and "--yes" in r.stderr and r.stdout == ""
    r = lab.gpufix(
        "apply",
        "--strategy",
        "single-gpu",
        "h1",
        "-i",
        inv,
        "--yes",
        "--no-verify",
        "--detailed-exitcode",
    )
    assert r.returncode == 2, r.stderr
    assert lab.sh("h1", "cat /etc/profile.d/gpufix-single-gpu.sh").stdout.count("CUDA_VISIBLE")


def test_ctrl_c_leaves_a_consistent_journal_and_apply_resumes(make_lab) -> None:
    lab = make_lab(2)
    plan = lab.workdir / "plan.json"
    make_plans(["h1", "h2"], lab.inventory, "nccl-profile", [NCCL_STEP], plan)
    proc = lab.popen("apply", str(plan), "-i", str(lab.inventory), "--yes", "--batch", "1")
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
    assert proc.returncode != 0 and "resume" in err, err
    run = next(runs.iterdir()).name
    meta = json.loads((runs / run / "run.json").read_text())
    assert meta["state"] == "interrupted"
    h1, h2 = _journal(lab, run, "h1"), _journal(lab, run, "h2")
    assert h1["state"] == "applying" and h1["steps"][0]["state"] == "started"
    assert h2["state"] == "pending"
    # the same plan again resumes that run: the cut step is run again, h2 goes on
    code, doc, err = _apply(lab, plan, "--batch", "1")
    assert doc["run"] == run and doc["resumed"], err
    assert code == 2 and {h["state"] for h in doc["hosts"]} == {"healthy"}, err
    # and once more: already applied, nothing to do
    code, doc, _ = _apply(lab, plan)
    assert code == 0 and doc["already_applied"]


def test_controller_reboot_step_then_probe(make_lab) -> None:
    """A step whose role does not reboot by itself: apply reboots it with playbooks/reboot.yml
    only when allowed, waits for it, then probes."""
    lab = make_lab(1)
    plan = lab.workdir / "plan.json"
    step = Step(NCCL_STEP.playbook, NCCL_STEP.description, dict(NCCL_STEP.vars), reboot=True)
    make_plans(["h1"], lab.inventory, "nccl-profile", [step], plan)
    code, doc, err = _apply(lab, plan, "--no-verify")
    assert code == 2 and _hosts(doc)["h1"]["state"] == "reboot-pending", err
    before = _pid1_start(lab, "h1")
    code, doc, err = _apply(lab, plan, "--allow-reboot")  # the same plan: finish it
    h1 = _hosts(doc)["h1"]
    assert code == 2 and doc["resumed"], err
    assert h1["state"] == "healthy" and h1["rebooted"], err
    assert _pid1_start(lab, "h1") != before
