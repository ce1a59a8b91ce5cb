"""`gpufix apply PLANFILE --interim` end to end on a podman container: real ansible-runner and
the nccl_profile role (issue 12 item 6, the plan contract's `interim`).

The host plays a bionic machine with two A100s behind a PLX switch whose ACS redirects P2P
(lspci output recorded on such a host, tests/fixtures/tool_outputs/lspci_vvv_plx_acs_on.txt),
and its probe hung until the `p2p-off` experiment (NCCL_P2P_DISABLE=1) turned it healthy. The
decision table's row p2p-off-acs-iommu makes the permanent fix pcie-acs (a reboot) and the
interim an nccl-profile (P2P off, no reboot). Marked integration; minutes on 2 cores.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from lab import HOST_HOOK, ROOT, Lab

pytestmark = [pytest.mark.integration, pytest.mark.slow]

LSPCI = ROOT / "tests" / "fixtures" / "tool_outputs" / "lspci_vvv_plx_acs_on.txt"
NCCL_CONF = "/etc/nccl.conf"
# What the permanent pcie-acs steps would leave (roles/pcie_acs/vars and defaults).
PCIE_ACS_FILES = (
    "/usr/local/sbin/gpufix-pcie-acs",
    "/etc/systemd/system/gpufix-pcie-acs.service",
    "/etc/default/grub.d/99-gpufix-iommu.cfg",
)
# The probe's verdict in the contract's form: the main run hung in the all-reduce, the first
# experiment (P2P off) ran healthy and decided.
VERDICT: dict[str, Any] = {
    "format": "gpufix-probe",
    "version": 1,
    "host": "h1",
    "verdict": "hung",
    "backend": "nccl",
    "world_size": 2,
    "deadline_s": 30,
    "duration_s": 34.6,
    "stalled": {"phase": "allreduce", "ranks": [0, 1]},
    "error": None,
    "phases": [],
    "single_gpu": None,
    "p2p": {"matrix": {}, "copy_gbps": {}},
    "no_p2p_rerun": None,
    "allreduce": [],
    "causes": [],
    "nccl_log_tail": [],
    "experiments": [
        {
            "id": "p2p-off",
            "env": {"NCCL_P2P_DISABLE": "1"},
            "gpus": None,
            "verdict": "healthy",
            "stalled": None,
            "error": None,
            "elapsed_s": 4.2,
        }
    ],
    "decided_by": "p2p-off",
}


def _acs_host(lab: Lab, host: str) -> None:
    """A bare host to the facts module (lab.py's HOST_HOOK hides the container's marks, so the
    permanent steps are the host's own), and lspci answers with the recorded PLX/ACS output
    (the container has no PCI devices)."""
    lab.sh(
        host,
        "site=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()[\"purelib\"])')\n"
        "cat > \"$site/gpufix_e2e_host.py\" <<'PY'\n" + HOST_HOOK + "PY\n"
        "echo 'import gpufix_e2e_host' > \"$site/gpufix-e2e-host.pth\"\n"
        "cat > /usr/local/bin/lspci <<'LSPCI'\n#!/bin/sh\ncat <<'OUT'\n"
        + LSPCI.read_text()
        + "OUT\nLSPCI\nchmod 0755 /usr/local/bin/lspci\n",
    )


def _plan(lab: Lab, out: Path) -> dict[str, Any]:
    verdict = lab.workdir / "verdict.json"
    verdict.write_text(json.dumps(VERDICT))
    r = lab.gpufix(
        "plan", "h1", "-i", str(lab.inventory), "--probe-verdict", str(verdict),
        "-o", str(out), "--json",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    (plan,) = json.loads(r.stdout)["plans"]
    return plan


def _apply(lab: Lab, plan: Path, *extra: str) -> tuple[int, dict, str]:
    r = lab.gpufix(
        "apply", str(plan), "-i", str(lab.inventory), "--json", "--detailed-exitcode",
        "--interim", *extra, timeout=900,
    )  # fmt: skip
    doc = json.loads(r.stdout) if r.stdout.strip() else {}
    return r.returncode, doc, r.stderr


def _untouched(lab: Lab, boot: str) -> None:
    """Nothing of the permanent fix is on the host, and it never rebooted."""
    for path in PCIE_ACS_FILES:
        assert lab.sh("h1", f"test -e {path}", check=False).returncode != 0, path
    assert lab.sh("h1", "cut -d ' ' -f 22 /proc/1/stat").stdout.strip() == boot


def test_interim_profile_runs_now_and_the_permanent_fix_waits(make_lab) -> None:
    # this lab has no boot simulation: the rollback reads the running kernel with uname
    lab = make_lab(
        1, setup="driver", hostvars={"h1": {"gpufix_kernel_running_command": "uname -r"}}
    )
    _acs_host(lab, "h1")
    boot = lab.sh("h1", "cut -d ' ' -f 22 /proc/1/stat").stdout.strip()
    path = lab.workdir / "plan.json"
    plan = _plan(lab, path)
    assert plan["strategy"] == "pcie-acs", plan["path"]
    assert plan["extra"]["decision"]["row"] == "p2p-off-acs-iommu"
    assert all(s["target"] == "host" for s in plan["steps"])  # a bare host's own fix
    interim = plan["interim"]
    assert interim["strategy"] == "nccl-profile" and interim["reboot_required"] is False
    assert [s["playbook"] for s in interim["steps"]] == ["nccl_profile.yml"]
    assert interim["steps"][0]["vars"]["gpufix_nccl_profile_names"] == ["no-p2p"]
    assert all(not s["reboot"] for s in interim["steps"])
    assert "nccl_defaults" not in plan["verify"]  # nothing turned off on the host yet

    # an edited interim is refused like an edited permanent step: exit 3, nothing run
    doc = json.loads(path.read_text())
    for edit in ("profile", "playbook"):
        bad = copy.deepcopy(doc)
        step = bad["plans"][0]["interim"]["steps"][0]
        if edit == "profile":
            step["vars"]["gpufix_nccl_profile_names"] = ["shm-off"]
        else:
            step["playbook"] = bad["plans"][0]["steps"][0]["playbook"]
        edited = lab.workdir / f"edited-{edit}.json"
        edited.write_text(json.dumps(bad))
        code, out, err = _apply(lab, edited, "--no-verify")
        assert code == 3 and out == {}, err
        assert "plans/0/interim/steps/0" in err and "Traceback" not in err
    assert lab.sh("h1", f"test -e {NCCL_CONF}", check=False).returncode != 0

    # --check: what the interim would change, and nothing changed, no run recorded
    code, out, err = _apply(lab, path, "--check")
    (h1,) = out["hosts"]
    assert code == 2 and out["check"] and out["run"] is None, err
    assert h1["state"] == "would-change" and "NCCL_P2P_DISABLE" in json.dumps(h1["diffs"])
    assert lab.sh("h1", f"test -e {NCCL_CONF}", check=False).returncode != 0
    assert not (lab.state / "runs").exists() or not any((lab.state / "runs").iterdir())

    # the interim run: the profile is on the host, the permanent fix is not, no reboot
    code, out, err = _apply(lab, path, "--probe-deadline", "90")
    (h1,) = out["hosts"]
    assert code == 2 and h1["state"] == "healthy" and not h1["rebooted"], err
    conf = lab.sh("h1", f"cat {NCCL_CONF}").stdout
    assert "NCCL_P2P_DISABLE=1" in conf
    _untouched(lab, boot)
    rec = json.loads((lab.state / "runs" / out["run"] / "h1.json").read_text())
    assert rec["strategy"] == "nccl-profile" and rec["state"] == "healthy"
    assert [s["playbook"] for s in rec["steps"]] == ["nccl_profile.yml"]
    assert all(s["state"] == "done" for s in rec["steps"])
    status = json.loads(lab.gpufix("status", out["run"], "--json").stdout)
    assert status["run"]["kind"] == "interim"

    # the same interim again: nothing to do, nothing changed
    code, again, err = _apply(lab, path, "--probe-deadline", "90")
    assert code == 0 and again["run"] == out["run"], err
    assert lab.sh("h1", f"cat {NCCL_CONF}").stdout == conf
    _untouched(lab, boot)

    # the profile is part of the host's facts now: the permanent fix from the same file is
    # refused as stale (nothing run), and a new plan from the same verdict still says pcie-acs
    r = lab.gpufix("apply", str(path), "-i", str(lab.inventory), "--json")
    assert r.returncode == 3 and "stale plan" in r.stderr and "nccl" in r.stderr, r.stderr
    _untouched(lab, boot)
    again_plan = _plan(lab, lab.workdir / "plan2.json")
    assert again_plan["strategy"] == "pcie-acs", again_plan["path"]
    # its verification probe runs with P2P at NCCL's default over the interim's nccl.conf
    assert again_plan["verify"]["nccl_defaults"] == "NCCL_P2P_DISABLE"

    # once the permanent fix is verified, the interim comes off by rolling its run back
    # (docs/operations.md): the file it wrote goes, as it was not there before
    r = lab.gpufix("rollback", out["run"], "h1", "-i", str(lab.inventory), "--json", timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert lab.sh("h1", f"test -e {NCCL_CONF}", check=False).returncode != 0
    assert "nccl_defaults" not in _plan(lab, lab.workdir / "plan3.json")["verify"]
