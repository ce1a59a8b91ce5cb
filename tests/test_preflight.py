"""gpufix preflight: each check on recorded facts, the report, the CLI entry point and a real run."""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path
from typing import Any

import pytest
from gpufix.engine import kb as kbmod
from gpufix.errors import InvalidInput
from gpufix.facts.snapshot import Snapshot, save_snapshot
from gpufix.workload import preflight
from gpufix.workload.preflight import CHECK_IDS, NO_GPU, main_preflight, run

GIB = 1 << 30

# Recorded on an Ubuntu 18.04 host with two RTX 3090 (values as the facts module reports them).
BIONIC_2X3090: dict[str, Any] = {
    "module_version": "1.0.0",
    "python": {"executable": "/opt/train/bin/python", "version": "3.8.0"},
    "os": {
        "id": "ubuntu",
        "version_id": "18.04",
        "codename": "bionic",
        "pretty_name": "Ubuntu 18.04.6 LTS",
    },
    "cpu": {"vendor": "GenuineIntel", "model": "Intel(R) Xeon(R) Silver 4210R CPU @ 2.40GHz"},
    "kernel": {
        "running": "5.4.0-150-generic",
        "cmdline": "BOOT_IMAGE=/boot/vmlinuz-5.4.0-150-generic root=UUID=1b2c ro quiet splash",
        "installed": ["4.15.0-213-generic", "5.4.0-150-generic"],
        "hwe": {
            "metapackage": "linux-generic-hwe-18.04",
            "installed": "5.4.0.150.167~18.04.1",
            "candidate": "5.4.0.150.167~18.04.1",
        },
    },
    "glibc": "2.27",
    "pythons": [
        {"path": "/usr/bin/python3", "version": "3.6.9"},
        {"path": "/usr/bin/python3.8", "version": "3.8.0"},
    ],
    "gpus": [
        {
            "index": 0,
            "name": "NVIDIA GeForce RTX 3090",
            "pci_bus_id": "00000000:3B:00.0",
            "memory_mib": 24576,
            "compute_capability": "8.6",
            "uuid": "GPU-6f2c3a1e-0d6b-2c51-9a57-2f1e7d3b8c01",
        },
        {
            "index": 1,
            "name": "NVIDIA GeForce RTX 3090",
            "pci_bus_id": "00000000:AF:00.0",
            "memory_mib": 24576,
            "compute_capability": "8.6",
            "uuid": "GPU-a41d9e07-77c2-5e0f-b3c8-91d0c4e5f602",
        },
    ],
    "driver": {
        "kernel_module": "470.182.03",
        "userspace": "470.182.03",
        "mismatch": False,
        "nvml_error": None,
    },
    "topology": {
        "matrix": {"GPU0": {"GPU1": "SYS"}, "GPU1": {"GPU0": "SYS"}},
        "worst": "SYS",
        "raw": None,
    },
    "p2p": {"read": {"GPU0": {"GPU1": "OK"}, "GPU1": {"GPU0": "OK"}}},
    "pcie": {"bridges": [], "gpus_behind_switch": False},
    "iommu": {
        "cmdline": {"intel_iommu": None, "amd_iommu": None, "iommu": None},
        "groups": 0,
        "mode": "off",
    },
    "shm": {"size_bytes": 32 * GIB, "path": "/dev/shm"},
    "cuda_toolkits": [{"version": "11.3", "path": "/usr/local/cuda-11.3"}],
    "cuda_default": {"version": "11.3", "path": "/usr/local/cuda-11.3"},
    "python_envs": [
        {
            "python": "/opt/train/bin/python",
            "version": "3.8.0",
            "packages": {
                "torch": "1.10.2+cu113",
                "transformers": "4.18.0",
                "accelerate": None,
                "nvidia-nccl-cu12": None,
            },
        }
    ],
    "secure_boot": {"enabled": False},
    "dkms": [],
    "packages": {
        "nvidia": {"nvidia-driver-470": "470.182.03-0ubuntu0.18.04.1"},
        "held": [],
        "kernel_nvidia_modules": [],
    },
    "unattended_upgrades": {"installed": True, "enabled": True, "nvidia_blacklisted": False},
    "containers": {
        "in_container": False,
        "docker": None,
        "podman": None,
        "nvidia_container_toolkit": None,
        "nvidia_runtime_configured": None,
        "ipc_host": None,
        "net_host": None,
    },
    "fabricmanager": {"installed": None, "running": False},
    "nccl": {"files": {}, "env": {}},
    "gpu_processes": [],
    "kernel_log": {"xid": 0, "nvrm": 0, "aer": 0, "source": "dmesg"},
    "network": {
        "interfaces": [{"name": "eno1", "up": True, "ipv4": ["10.0.0.5/24"]}],
        "infiniband": [],
    },
    "env": {"CUDA_VISIBLE_DEVICES": None},
}


def facts(**changes: Any) -> dict[str, Any]:
    """The recorded facts with dotted-path changes: facts(**{"driver.userspace": "535.1"})."""
    data = copy.deepcopy(BIONIC_2X3090)
    for path, value in changes.items():
        node = data
        *parents, last = path.split(".")
        for p in parents:
            node = node[p]
        node[last] = value
    return data


def torch_env(torch: str, **packages: str | None) -> list[dict[str, Any]]:
    return [
        {
            "python": "/opt/train/bin/python",
            "version": "3.8.0",
            "packages": {"torch": torch, **packages},
        }
    ]


@pytest.fixture(scope="module")
def kb() -> kbmod.KnowledgeBase:
    return kbmod.load()


def check(cid: str, data: dict[str, Any], env: dict[str, str] | None = None) -> Any:
    return run(data, env=env).check(cid)


def test_recorded_host_passes_but_warns_about_its_kernel() -> None:
    report = run(facts())
    assert [c.id for c in report.checks] == list(CHECK_IDS)
    assert {c.id: c.status for c in report.checks} == {
        "kernel": "warn",
        "driver-mismatch": "pass",
        "driver-cuda": "pass",
        "visible-devices": "pass",
        "shm": "pass",
        "acs-iommu": "pass",
        "nccl-config": "pass",
        "fabric-manager": "skip",
        "gpu-arch": "pass",
    }
    assert report.status == "warn" and report.exit_code == 0


def test_kernel_warning_is_a_risk_factor_and_names_the_bionic_ceiling(kb) -> None:
    r = check("kernel", facts())
    assert r.status == "warn"
    assert "below 5.5.0" in r.message and "risk factor, not a diagnosed cause" in r.message
    assert "18.04's newest supported kernel is 5.4" in r.message
    assert r.evidence["source"] == kb.accelerate_kernel_check.source
    focal = facts(**{"os.codename": "focal", "kernel.running": "5.4.0-42-generic"})
    r = check("kernel", focal)
    assert r.status == "warn" and "newest supported" not in r.message
    assert check("kernel", facts(**{"kernel.running": "5.15.0-91-generic"})).status == "pass"
    assert check("kernel", facts(**{"kernel.running": "5.5.0"})).status == "pass"
    unknown = facts(**{"kernel.running": {"unknown": "uname: not found"}})
    r = check("kernel", unknown)
    assert r.status == "skip" and "uname: not found" in r.message


@pytest.mark.parametrize(
    ("driver", "torch", "extra", "status", "words"),
    [
        ("470.182.03", "1.10.2+cu113", {}, "pass", "needs >= 465.19.01"),
        ("470.182.03", "2.1.2+cu121", {}, "fail", "needs at least 525.60.13"),
        ("525.85.12", "2.1.2+cu121", {}, "warn", "minor-version compatibility floor 525.60.13"),
        ("535.183.01", "2.1.2+cu121", {}, "pass", "needs >= 530.30.02"),
        ("550.54.14", "2.8.0+cu128", {}, "warn", "below 570.26"),
        ("550.54.14", "2.9.0+cu130", {}, "fail", "needs at least 580"),
        ("470.182.03", "2.1.2", {"nvidia-nccl-cu12": "2.18.1"}, "fail", "CUDA 12.x"),
        ("535.183.01", "2.1.2", {"nvidia-nccl-cu12": "2.18.1"}, "pass", "floor 525.60.13"),
        ("470.182.03", "2.1.2", {}, "skip", "names no CUDA version"),
        ("470.182.03", "2.1.2+cpu", {}, "skip", "not a CUDA build"),
        ("470.182.03", "2.3.0+rocm6.0", {}, "skip", "not a CUDA build"),
        # NGC's source builds: the knowledge base's container_images name their CUDA
        ("535.129.03", "2.1.0a0+32f93b1", {}, "pass", "CUDA 12.2 (torch 2.1.0a0+32f93b1 of"),
        ("470.182.03", "2.1.0a0+32f93b1", {}, "fail", "too old for CUDA 12.2"),
        ("570.86.15", "2.6.0a0+ecf3bae", {}, "pass", "pytorch:25.01-py3"),
        ("535.129.03", "2.2.0a0+81ea7a4", {}, "skip", "source build"),
        ("535.129.03", "2.2.0a0+81ea7a4", {"nvidia-nccl-cu12": "2.19.3"}, "pass", "12.x floor"),
    ],
)
def test_driver_vs_torch_cuda(driver, torch, extra, status, words) -> None:
    data = facts(**{"driver.userspace": driver, "driver.kernel_module": driver})
    data["python_envs"] = torch_env(torch, **extra)
    r = check("driver-cuda", data)
    assert (r.status, words in r.message) == (status, True), r.message


def test_driver_cuda_prefers_the_running_interpreter_and_skips_without_gpu() -> None:
    data = facts()
    data["python_envs"] = [
        *torch_env("2.1.2+cu121"),
        {"python": "/usr/bin/python3", "version": "3.6.9", "packages": {"torch": "1.4.0+cu92"}},
    ]
    data["python"]["executable"] = "/usr/bin/python3"
    r = check("driver-cuda", data)
    assert r.status == "skip" and "no driver minimum for CUDA 9.2" in r.message
    data["python"]["executable"] = "/elsewhere/python"  # not among them: all are checked
    assert check("driver-cuda", data).status == "fail"
    assert check("driver-cuda", facts(gpus=[])).message == NO_GPU
    assert check("driver-cuda", facts(python_envs=[])).status == "skip"


@pytest.mark.parametrize(
    ("value", "status", "visible"),
    [
        (None, "pass", None),
        ("0,1", "pass", [0, 1]),
        ("1", "pass", [1]),
        (" 1 , 0 ", "pass", [1, 0]),
        ("", "fail", None),
        ("0,2", "fail", [0]),
        ("2,0", "fail", []),
        ("-1", "fail", []),
        ("0,0", "fail", [0]),
        ("GPU-a41d9e07", "pass", [1]),
        ("GPU-", "fail", []),
        ("0,MIG-1c0e7f9a-5b0c-5b6e-8c8e-2f1f0b7b8a11", "warn", [0]),
    ],
)
def test_visible_devices(value, status, visible) -> None:
    r = check("visible-devices", facts(**{"env.CUDA_VISIBLE_DEVICES": value}))
    assert r.status == status, r.message
    if visible is not None:
        assert r.evidence["visible"] == visible
    if value == "":
        assert "hides every GPU" in r.message
    if value == "0,2":
        assert "entry '2'" in r.message and "visible: 0" in r.message


def test_visible_devices_reads_the_given_environment() -> None:
    recorded = facts(**{"env.CUDA_VISIBLE_DEVICES": "0,1"})
    assert check("visible-devices", recorded, env={"CUDA_VISIBLE_DEVICES": "3"}).status == "fail"
    assert check("visible-devices", recorded, env={}).status == "pass"
    assert check("visible-devices", facts(gpus=[])).message == NO_GPU
    r = check("visible-devices", facts(gpus={"unknown": "nvidia-smi: not found"}))
    assert r.status == "skip" and "nvidia-smi: not found" in r.message


@pytest.mark.parametrize(
    ("size", "gpus", "status"),
    [
        (64 << 20, 2, "fail"),  # Docker's default
        (255 << 20, 2, "fail"),
        (256 << 20, 1, "warn"),
        (2 * GIB, 4, "warn"),
        (2 * GIB, 2, "pass"),
        (32 * GIB, 8, "pass"),
    ],
)
def test_shm(size, gpus, status) -> None:
    data = facts(**{"shm.size_bytes": size})
    data["gpus"] = [dict(data["gpus"][0], index=i) for i in range(gpus)]
    r = check("shm", data)
    assert r.status == status, r.message
    if status == "fail":
        assert "--ipc=host" in r.message and "64 MiB" in r.message


def test_shm_skips() -> None:
    assert check("shm", facts(gpus=[])).message == NO_GPU
    r = check("shm", facts(shm={"unknown": "statvfs: permission denied"}))
    assert r.status == "skip" and "permission denied" in r.message


def test_nccl_config() -> None:
    conf = {"/etc/nccl.conf": {"NCCL_DEBUG": "INFO", "NCCL_SOCKET_IFNAME": "eno1"}}
    r = check("nccl-config", facts(**{"nccl.files": conf}))
    assert r.status == "warn" and "NCCL_DEBUG=INFO in /etc/nccl.conf" in r.message
    r = check("nccl-config", facts(), env={"NCCL_P2P_DISABLE": "1", "PATH": "/usr/bin"})
    assert r.status == "warn" and "costs bandwidth" in r.message
    assert r.evidence["settings"] == [
        {"where": "environment", "key": "NCCL_P2P_DISABLE", "value": "1"}
    ]
    recorded = facts(**{"nccl.env": {"NCCL_DEBUG_SUBSYS": "INIT"}})
    assert check("nccl-config", recorded).status == "warn"
    assert check("nccl-config", recorded, env={}).status == "pass"  # the live env wins
    quiet = {"NCCL_DEBUG": "WARN", "NCCL_P2P_DISABLE": "0", "NCCL_IB_DISABLE": "1"}
    assert check("nccl-config", facts(), env=quiet).status == "pass"
    unreadable = {"/etc/nccl.conf": {"unknown": "permission denied"}}
    assert check("nccl-config", facts(**{"nccl.files": unreadable})).status == "pass"


def test_p2p_off_on_gpus_without_p2p_is_no_workaround() -> None:
    """NCCL_P2P_DISABLE=1 is the fix where the GPUs have no P2P (RTX 4090, nccl#1127), and
    changes nothing where the driver refuses it: not the bandwidth-costing workaround it is
    elsewhere."""
    no_p2p = [{**g, "name": "NVIDIA GeForce RTX 4090"} for g in facts()["gpus"]]
    r = check("nccl-config", facts(gpus=no_p2p, p2p={"unknown": "not read"}),
              env={"NCCL_P2P_DISABLE": "1"})  # fmt: skip
    assert r.status == "pass" and r.evidence["gpus_without_p2p"] is True
    refused = {"read": {"GPU0": {"GPU1": "CNS"}, "GPU1": {"GPU0": "CNS"}}}
    assert check("nccl-config", facts(p2p=refused), env={"NCCL_P2P_DISABLE": "1"}).status == "pass"
    assert check("nccl-config", facts(), env={"NCCL_P2P_DISABLE": "1"}).status == "warn"


def test_one_model_without_p2p_does_not_speak_for_a_mixed_host() -> None:
    """With no P2P reading, an RTX 4090 beside two GPUs of a model not listed leaves a pair that
    may do P2P: NCCL_P2P_DISABLE=1 costs that pair bandwidth, so it is still a workaround. Beside
    one such GPU, every pair has the 4090 in it."""
    base = facts()["gpus"][0]
    names = ["NVIDIA GeForce RTX 4090", "NVIDIA RTX A6000", "NVIDIA RTX A6000"]
    mixed = [{**base, "index": i, "name": n} for i, n in enumerate(names)]
    unread = {"unknown": "not read"}
    r = check("nccl-config", facts(gpus=mixed, p2p=unread), env={"NCCL_P2P_DISABLE": "1"})
    assert r.status == "warn" and "gpus_without_p2p" not in r.evidence, r.message
    r = check("nccl-config", facts(gpus=mixed[:2], p2p=unread), env={"NCCL_P2P_DISABLE": "1"})
    assert r.status == "pass" and r.evidence["gpus_without_p2p"] is True


ACS_BRIDGE = {
    "bdf": "0000:02:08.0",
    "name": "PCI bridge: PLX Technology, Inc. PEX 8747",
    "above_gpu": True,
    "acs_enabled": True,
    "acs_cap": {"ReqRedir": True, "CmpltRedir": True},
    "acs_ctl": {"ReqRedir": True, "CmpltRedir": True},
}


@pytest.mark.parametrize(
    ("changes", "status", "words"),
    [
        ({}, "pass", "no ACS redirect above the GPUs; IOMMU off"),
        ({"pcie.bridges": [ACS_BRIDGE]}, "warn", "ACS redirect is on at 0000:02:08.0"),
        (
            {"pcie.bridges": [ACS_BRIDGE], "topology.worst": "PIX"},
            "warn",
            "bounced up to the root complex",
        ),
        ({"iommu.mode": "translated"}, "warn", "IOMMU is in translated mode"),
        ({"iommu.mode": "pt"}, "pass", "IOMMU pt"),
        ({"pcie.bridges": {"unknown": "setpci: permission denied"}}, "skip", "needs root"),
        ({"pcie.bridges": [{**ACS_BRIDGE, "above_gpu": False}]}, "pass", "no ACS redirect"),
        ({"gpus": BIONIC_2X3090["gpus"][:1]}, "skip", "one GPU"),
        ({"gpus": []}, "skip", NO_GPU),
    ],
)
def test_acs_iommu(changes: dict[str, Any], status: str, words: str) -> None:
    r = check("acs-iommu", facts(**changes))
    assert (r.status, words in r.message) == (status, True), r.message
    if "pcie.bridges" in changes and status == "warn":
        assert r.evidence["acs_source"].startswith("https://docs.nvidia.com/deeplearning/nccl/")


def test_driver_mismatch() -> None:
    r = check(
        "driver-mismatch",
        facts(
            driver={
                "kernel_module": "535.161.07",
                "userspace": "535.183.01",
                "mismatch": True,
                "nvml_error": "Driver/library version mismatch",
            }
        ),
    )
    assert r.status == "fail" and "hold every nvidia-*/libnvidia-*" in r.message
    split = facts(**{"driver.userspace": "535.183.06", "driver.mismatch": None})
    assert check("driver-mismatch", split).status == "fail"
    assert check("driver-mismatch", facts()).status == "pass"
    none = facts(
        gpus=[],
        driver={
            "kernel_module": {"unknown": "no NVIDIA kernel module loaded"},
            "userspace": None,
            "mismatch": None,
            "nvml_error": None,
        },
    )
    assert check("driver-mismatch", none).message == NO_GPU
    assert run(none).exit_code == 0


def test_report_exit_codes_and_dict() -> None:
    bad = facts(**{"env.CUDA_VISIBLE_DEVICES": ""})
    report = run(bad)
    assert report.status == "fail" and report.exit_code == 1
    doc = report.to_dict()
    assert doc["format"] == "gpufix-preflight" and doc["status"] == "fail"
    assert json.loads(json.dumps(doc)) == doc
    no_gpu = facts(gpus=[], **{"kernel.running": "6.8.0-45-generic"})
    assert run(no_gpu).exit_code == 0


def test_invalid_facts_are_one_line_invalid_input() -> None:
    broken = facts()
    del broken["shm"]
    with pytest.raises(InvalidInput, match="invalid gpufix facts snapshot"):
        run(broken)


def _main(*args: Any, **kwargs: Any) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main_preflight(*args, out=out, err=err, **kwargs)
    return code, out.getvalue(), err.getvalue()


def test_main_with_a_facts_file(tmp_path: Path) -> None:
    path = tmp_path / "host01.json"
    save_snapshot(Snapshot("host01", "2026-11-29T21:00:00Z", facts()), path)
    code, out, err = _main(json_out=True, facts_file=str(path))
    doc = json.loads(out)
    assert code == 0 and err == ""
    assert doc["host"] == "host01" and doc["source"] == str(path) and doc["status"] == "warn"

    bad = facts(**{"shm.size_bytes": 64 << 20})
    save_snapshot(Snapshot("host02", "2026-11-29T21:00:00Z", bad), path)
    code, out, _ = _main(facts_file=str(path))
    assert code == 1
    assert out.splitlines()[-1] == "host02: fail (6 pass, 1 warn, 1 fail, 1 skip)"
    assert any(line.startswith("FAIL  shm ") for line in out.splitlines())


def test_main_bad_input_is_one_line(tmp_path: Path) -> None:
    assert _main(facts_file=str(tmp_path / "missing.json"))[0] == 3
    garbage = tmp_path / "garbage.json"
    garbage.write_text("{not json")
    code, out, err = _main(facts_file=str(garbage))
    assert code == 3 and out == "" and len(err.splitlines()) == 1
    assert err.startswith("gpufix preflight: error: facts file")


def test_on_this_host_for_real() -> None:
    """Gathers real facts here: this machine has no NVIDIA GPU, so GPU checks skip."""
    report = run(env={})
    by = {c.id: c for c in report.checks}
    assert report.source == "local"
    assert by["kernel"].status in ("pass", "warn")
    assert by["visible-devices"].status == "skip" and by["shm"].status == "skip"
    assert report.exit_code == 0


@pytest.mark.slow
def test_probe_check_runs_the_real_probe_on_cpu() -> None:
    """torch CPU + gloo, two ranks: the same program the GPU path runs, on this host."""
    pytest.importorskip("torch")
    r = preflight.check_probe(
        facts(gpus=[]), args=("--quick", "--world-size", "2", "--deadline", "60"), cpu=True
    )
    assert r.status == "pass" and r.message.startswith("probe: healthy: 2 ranks (gloo)")
    assert r.evidence["verdict"]["format"] == "gpufix-probe"


def test_probe_skips_without_gpu() -> None:
    r = run(facts(gpus=[]), probe=True).check("probe")
    assert r.status == "skip" and r.message == NO_GPU
    # The facts claim two GPUs but this host has none: the probe itself says not applicable.
    r = preflight.check_probe(facts(), args=("--quick", "--deadline", "30"))
    assert r.status == "skip" and r.message.startswith("probe: not applicable")


@pytest.mark.parametrize(
    ("snapshot", "check_id", "status", "needle"),
    [
        # a review (2026-12-06): preflight passed both, where `gpufix plan` reports errors
        ("a100-fm-mismatch", "fabric-manager", "fail", "vs driver 535.154.05"),
        ("a100-fm-mismatch", "gpu-arch", "pass", "kernels for every GPU"),
        ("jammy-4xp100-torch28", "gpu-arch", "fail", "no kernels for this GPU architecture"),
        ("jammy-4xp100-torch28", "fabric-manager", "skip", "no NVSwitch"),
        ("bionic-hwe-8xa100", "fabric-manager", "pass", "515.105.01 running"),
    ],
)
def test_fabric_manager_and_gpu_arch_read_the_facts_as_plan_does(
    snapshot: str, check_id: str, status: str, needle: str
) -> None:
    """Recorded hosts (tests/fixtures/hosts): the engine's findings, through preflight."""
    doc = json.loads((Path(__file__).parent / "fixtures/hosts" / f"{snapshot}.json").read_text())
    r = run(doc).check(check_id)
    assert (r.status, needle in r.message) == (status, True), r
    if status == "fail":
        assert r.evidence["source"].startswith("https://")
