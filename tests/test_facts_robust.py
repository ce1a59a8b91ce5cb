"""The facts module on hosts that half-answer: a kernel log it may not read, a GPU off the bus,
driver branches other than 535, slow tools that add up, PCI domains past four hex digits.

Unknown is not evidence: what the module could not read must read as unknown, never as 0 or [].
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import yaml
from gpufix.facts import snapshot as F
from gpufix.facts.host import from_facts
from gpufix.facts.local import load_module

OUT = Path(__file__).parent / "fixtures" / "tool_outputs"
g = load_module()

Result = tuple[int, str, str] | str


def stub_tools(ctx: object, table: dict[str, Result]) -> None:
    """Let ctx answer commands from table, {tool: (rc, stdout, stderr) or an Unknown reason};
    a tool not in the table is not found. Nothing real runs."""

    def run(argv: list[str], timeout: object) -> object:
        result = table.get(argv[0], f"{argv[0]}: not found")
        return g.Unknown(result) if isinstance(result, str) else result

    ctx._run = run  # type: ignore[attr-defined]


def stub_bin(tmp_path: Path, name: str, script: str) -> Path:
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    tool = bindir / name
    tool.write_text("#!/bin/sh\n" + script)
    tool.chmod(0o755)
    return bindir


# ----------------------------------------------------------------------------- kernel log

DMESG_EPERM = (1, "", "dmesg: read kernel buffer failed: Operation not permitted\n")
# journalctl as a user outside adm/systemd-journal: exit 0, its own user journal only.
JOURNAL_USER_ONLY = (
    0,
    "-- No entries --\n",
    "Hint: You are currently not seeing messages from other users and the system.\n"
    "      Users in groups 'adm', 'systemd-journal' can see all messages.\n"
    "      Pass -q to turn off this notice.\n",
)
JOURNAL_NO_FILES = (0, "", "No journal files were opened due to insufficient permissions.\n")
BOOT_LINES = (
    "[    0.000000] Linux version 5.15.0-91-generic (buildd@lcy02-amd64-045)\n"
    "[    4.812345] nvidia: loading out-of-tree module taints kernel.\n"
)


@pytest.mark.parametrize(
    ("table", "needles"),
    [
        (
            {"dmesg": DMESG_EPERM, "journalctl": JOURNAL_USER_ONLY},
            ["Operation not permitted", "not seeing messages from other users"],
        ),
        ({"dmesg": DMESG_EPERM, "journalctl": JOURNAL_NO_FILES}, ["insufficient permissions"]),
        ({"dmesg": DMESG_EPERM, "journalctl": (0, "-- No entries --\n", "")}, ["no kernel"]),
        ({"dmesg": (0, "", "")}, ["dmesg: no kernel messages", "journalctl: not found"]),
    ],
)
def test_an_unreadable_kernel_log_is_unknown_not_zero_xids(
    table: dict[str, Result], needles: list[str]
) -> None:
    ctx = g.Context()
    stub_tools(ctx, table)
    with pytest.raises(g.Unknown) as err:
        g.g_kernel_log(ctx, {})
    for needle in needles:
        assert needle in err.value.reason
    # The controller reads it as "not known" (no finding), not as "no Xid errors".
    facts = {"kernel_log": g.unknown(err.value.reason)}
    assert from_facts(facts).xid is None


def test_a_kernel_log_read_with_no_xid_keeps_zero() -> None:
    ctx = g.Context()
    stub_tools(ctx, {"dmesg": (0, BOOT_LINES, "")})
    assert g.g_kernel_log(ctx, {}) == {"xid": 0, "nvrm": 0, "aer": 0, "source": "dmesg"}


def test_journalctl_read_as_root_counts_after_dmesg_is_refused() -> None:
    ctx = g.Context()
    log = (OUT / "dmesg_xid_aer.txt").read_text()
    stub_tools(ctx, {"dmesg": DMESG_EPERM, "journalctl": (0, log, "")})
    got = g.g_kernel_log(ctx, {})
    assert got == {"xid": 1, "nvrm": 3, "aer": 2, "source": "journalctl"}


# ----------------------------------------------------------------------------- a GPU off the bus

ROWS = [
    "0, NVIDIA A100-SXM4-80GB, 00000000:07:00.0, 81920, 8.0, GPU-0a",
    "1, NVIDIA A100-SXM4-80GB, 00000000:0F:00.0, 81920, 8.0, GPU-0b",
    "3, NVIDIA A100-SXM4-80GB, 00000000:4E:00.0, 81920, 8.0, GPU-0d",
]
LOST = (
    "Unable to determine the device handle for GPU 0000:47:00.0: GPU is lost.  "
    "Reboot the system to recover this GPU"
)
LOST_SMI = f"""case "$*" in
  *--query-gpu=index*) echo '{ROWS[0]}'; echo '{ROWS[1]}'; echo '{LOST}'; echo '{ROWS[2]}'; exit 15;;
  *driver_version*) echo '{LOST}'; echo 535.183.01; echo 535.183.01; echo 535.183.01; exit 15;;
  *) exit 15;;
esac
"""


def test_a_lost_gpu_keeps_the_others_and_is_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bindir = stub_bin(tmp_path, "nvidia-smi", LOST_SMI)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    ctx = g.Context(timeout=5)
    gpus = g.g_gpus(ctx, {})
    assert [x["index"] for x in gpus] == [0, 1, 3]
    driver = g.g_driver(ctx, {})
    assert driver["gpu_errors"] == [
        {
            "pci_bus_id": "0000:47:00.0",
            "message": "GPU is lost. Reboot the system to recover this GPU",
            "rc": 15,
        }
    ]
    # The error line's '0000:47:00.0' is not a driver version.
    assert driver["userspace_sources"]["nvidia_smi"] == "535.183.01"
    assert driver["nvml_error"] is None


def test_a_lost_gpu_gather_is_schema_valid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bindir = stub_bin(tmp_path, "nvidia-smi", LOST_SMI)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    facts = g.gather({"timeout": 5})
    assert len(facts["gpus"]) == 3
    assert facts["driver"]["gpu_errors"][0]["rc"] == 15
    assert F.schema_errors(F.from_module_result("h", facts).to_doc()) == []


def test_every_gpu_lost_is_unknown_with_the_errors_listed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = LOST.replace("0000:47:00.0", "0000:4E:00.0")
    bindir = stub_bin(tmp_path, "nvidia-smi", f"echo '{LOST}'; echo '{other}' >&2; exit 15\n")
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    ctx = g.Context(timeout=5)
    with pytest.raises(g.Unknown, match="nvidia-smi: exit 15"):
        g.g_gpus(ctx, {})
    errors = g.g_driver(ctx, {})["gpu_errors"]
    assert [e["pci_bus_id"] for e in errors] == ["0000:47:00.0", "0000:4e:00.0"]


@pytest.mark.parametrize(
    ("text", "bdf", "message"),
    [
        (LOST, "0000:47:00.0", "GPU is lost. Reboot the system to recover this GPU"),
        (
            "Unable to determine the device handle for GPU0000:65:00.0: Unknown Error",
            "0000:65:00.0",
            "Unknown Error",
        ),
        (
            "Unable to determine the device handle for gpu 00010000:01:00.0: Unknown Error",
            "10000:01:00.0",
            "Unknown Error",
        ),
    ],
)
def test_gpu_error_lines(text: str, bdf: str, message: str) -> None:
    assert g.parse_gpu_errors("0, A100, x\n" + text + "\n", 15) == [
        {"pci_bus_id": bdf, "message": message, "rc": 15}
    ]


def test_gpu_errors_without_a_gpu_named() -> None:
    assert g.gpu_errors(0, ROWS[0], "") == []
    assert g.gpu_errors(15, ROWS[0], "GPU access blocked\n") == [
        {"pci_bus_id": None, "message": "GPU access blocked", "rc": 15}
    ]
    # Another failure that names no GPU (a crash, a refused field) is not a lost GPU.
    for rc in (2, -11, 255):
        with pytest.raises(g.Unknown, match=f"nvidia-smi: exit {rc}"):
            g.gpu_errors(rc, ROWS[0], "Segmentation fault\n")


# ----------------------------------------------------------------------------- driver branches

POLICY = 'APT::Periodic::Unattended-Upgrade "1";\nUnattended-Upgrade::Package-Blacklist "";\n'


def blacklist(*patterns: str) -> str:
    lines = "".join(f'Unattended-Upgrade::Package-Blacklist:: "{p}";\n' for p in patterns)
    return POLICY + lines


D535 = ("nvidia-driver-535", "libnvidia-compute-535")
D550 = ("nvidia-driver-550", "libnvidia-compute-550")
D470_SERVER = ("nvidia-driver-470-server", "libnvidia-compute-470-server")
D580_OPEN = ("nvidia-driver-580-open", "libnvidia-compute-580")
D590 = ("nvidia-open", "libnvidia-compute")  # NVIDIA's repository names 590+ without a branch


@pytest.mark.parametrize(
    ("installed", "dump", "covered"),
    [
        (D550, blacklist(*D550), True),
        (D550, blacklist(*D535), False),  # the 535 names do not hold a 550 driver
        (D470_SERVER, blacklist("^nvidia-", "^libnvidia-"), True),
        (D580_OPEN, blacklist("nvidia-driver-580-open"), False),
        (D580_OPEN, blacklist("nvidia-driver-580", "libnvidia-compute-580"), True),
        # No driver yet: one branch's names don't cover the driver the next install brings.
        ((), blacklist(*D535), False),
        ((), blacklist("nvidia-", "libnvidia-"), True),
        # A review: 590+'s unversioned names fell back to the samples, which the branch-dash
        # patterns cover, so a blacklist that holds none of the installed packages read as held.
        (D590, blacklist("nvidia-driver-", "libnvidia-compute-"), False),
        (D590, blacklist("nvidia-open", "libnvidia-compute"), True),
    ],
)
def test_unattended_blacklist_is_checked_against_any_branch(
    installed: tuple[str, ...], dump: str, covered: bool
) -> None:
    ctx = g.Context()
    packages = {"unattended-upgrades": "2.8ubuntu1"}
    packages.update({name: "1.0-0ubuntu1" for name in installed})
    ctx._cache["dpkg"] = packages
    ctx.run = lambda argv, **_: dump  # type: ignore[method-assign]
    assert g.g_unattended(ctx, {})["nvidia_blacklisted"] is covered


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


PRIME = """# This file was generated by nvidia-prime
blacklist nvidia
blacklist nvidia-drm
blacklist nvidia-modeset
alias nvidia off
alias nvidia-drm off
alias nvidia-modeset off
"""
BUMBLEBEE = "# 304\nblacklist nvidia-304\n# current\nblacklist nvidia-current\nblacklist nouveau\n"


def test_modprobe_blacklists_of_any_branch(tmp_path: Path) -> None:
    etc, lib, usr = (tmp_path / d for d in ("etc", "lib", "usr/lib"))
    write(lib, "blacklist-nvidia.conf", PRIME)  # nvidia-prime's intel mode
    write(etc, "bumblebee.conf", BUMBLEBEE)
    write(lib, "blacklist-framebuffer.conf", "blacklist nvidiafb\nblacklist rivafb\n")
    write(usr, "nvidia-graphics-drivers-kms.conf", "options nvidia-drm modeset=1\n")
    write(etc, "gpufix-blacklist-nouveau.conf", "blacklist nouveau\n")
    # not a module name modprobe would match, nor one the facts schema takes: skipped
    write(etc, "odd.conf", "blacklist nvidia-*\nblacklist nvidia_drm.x\n")
    write(etc, "local.conf", "blacklist nvidia_uvm  # no CUDA here\n# blacklist nvidia\n")
    dirs = (str(etc), str(lib), str(usr))
    got = g.modprobe_blacklist(g.Context(), dirs)
    assert [(e["module"], Path(e["path"]).name) for e in got] == [
        ("nvidia-304", "bumblebee.conf"),
        ("nvidia-current", "bumblebee.conf"),
        ("nvidia_uvm", "local.conf"),
        ("nvidia", "blacklist-nvidia.conf"),
        ("nvidia-drm", "blacklist-nvidia.conf"),
        ("nvidia-modeset", "blacklist-nvidia.conf"),
    ]
    # modprobe.d(5): a file of the same name in /etc hides the one in /lib.
    write(etc, "blacklist-nvidia.conf", "# nvidia allowed again\n")
    got = g.modprobe_blacklist(g.Context(), dirs)
    assert [e["module"] for e in got] == ["nvidia-304", "nvidia-current", "nvidia_uvm"]
    assert g.modprobe_blacklist(g.Context(), (str(tmp_path / "none"),)) == []


# ----------------------------------------------------------------------------- time budget


def test_documented_total_timeout() -> None:
    option = yaml.safe_load(g.DOCUMENTATION)["options"]["total_timeout"]
    assert option["default"] == g.DEFAULT_TOTAL_TIMEOUT
    assert option["type"] == "int"


def test_a_command_gets_what_is_left_of_the_budget() -> None:
    ctx = g.Context(timeout=10, budget=1)
    start = time.monotonic()
    with pytest.raises(g.Unknown, match=r"timeout after .*time budget ran out"):
        ctx.run(["sleep", "5"])
    assert time.monotonic() - start < 3
    with pytest.raises(g.Unknown, match="true: not run, the 1s time budget is spent"):
        ctx.run(["true"])


def test_a_budget_that_is_not_spent_changes_nothing() -> None:
    ctx = g.Context(timeout=5, budget=60)
    assert ctx.run(["echo", "hi"]) == "hi\n"
    with pytest.raises(g.Unknown, match=r"^sleep: timeout after 1s$"):
        g.Context(timeout=1, budget=60).run(["sleep", "5"])


def test_gather_stops_running_tools_when_the_budget_is_spent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bindir = stub_bin(tmp_path, "nvidia-smi", "sleep 30\n")
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    start = time.monotonic()
    facts = g.gather({"timeout": 10, "total_timeout": 2})
    assert time.monotonic() - start < 2 + g.KILL_GRACE + 2
    assert "time budget" in facts["gpus"]["unknown"]
    # Cut short by the budget is not "nvidia-smi hangs": no NVML failure is claimed.
    assert facts["driver"]["nvml_error"] is None
    assert F.is_unknown(facts["driver"]["gpu_errors"])
    env = facts["python_envs"][0]
    assert "time budget is spent" in env["version"]["unknown"]
    assert F.schema_errors(F.from_module_result("h", facts).to_doc()) == []


# ----------------------------------------------------------------------------- VMD domains

LSPCI_VMD = """0000:00:01.0 PCI bridge: Intel Corporation Device 09ab (prog-if 00 [Normal decode])
\tBus: primary=00, secondary=01, subordinate=01, sec-latency=0
\tCapabilities: [40] Express (v2) Root Port (Slot+), MSI 00
\tCapabilities: [220 v1] Access Control Services
\t\tACSCap:\tSrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-
\t\tACSCtl:\tSrcValid- TransBlk- ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans-

0000:00:0e.0 RAID bus controller: Intel Corporation Volume Management Device NVMe RAID Controller
\tSubsystem: Intel Corporation Device 0000

0000:01:00.0 Non-Volatile memory controller: Samsung Electronics Co Ltd NVMe SSD Controller

10000:00:02.0 PCI bridge: Intel Corporation Sky Lake-E PCI Express Root Port C (rev 04)
\tBus: primary=00, secondary=01, subordinate=01, sec-latency=0
\tCapabilities: [90] Express (v2) Root Port (Slot+), MSI 00
\tCapabilities: [148 v1] Access Control Services
\t\tACSCap:\tSrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-
\t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-

10000:01:00.0 3D controller: NVIDIA Corporation GA100 [A100 PCIe 40GB] (rev a1)
\tSubsystem: NVIDIA Corporation Device 145f
"""


@pytest.mark.parametrize(
    ("raw", "bdf"),
    [
        ("10000:01:00.0", "10000:01:00.0"),
        ("00010000:01:00.0", "10000:01:00.0"),  # nvidia-smi's 8-digit form
        ("1000A:3B:00.0", "1000a:3b:00.0"),
        ("0001:02:00.0", "0001:02:00.0"),
    ],
)
def test_vmd_domains_keep_their_digits(raw: str, bdf: str) -> None:
    assert g.normalise_bdf(raw) == bdf


def test_lspci_with_a_vmd_domain() -> None:
    pcie = g.summarise_pcie(LSPCI_VMD)
    assert pcie["gpu_bdfs"] == ["10000:01:00.0"]
    above = {b["bdf"]: b["above_gpu"] for b in pcie["bridges"]}
    # Bus 01 of domain 0000 is not the GPU's bus 01 of domain 10000.
    assert above == {"0000:00:01.0": False, "10000:00:02.0": True}
    assert pcie["gpus_behind_switch"] is False


def test_sysfs_parents_in_a_vmd_domain(monkeypatch: pytest.MonkeyPatch) -> None:
    path = "/sys/devices/pci0000:00/0000:00:0e.0/pci10000:00/10000:00:02.0/10000:01:00.0"
    monkeypatch.setattr(g.os.path, "realpath", lambda _: path)
    # The VMD controller above the domain is no bridge on the GPU's link (nor a switch).
    assert g._parent_bridges("10000:01:00.0") == ["10000:00:02.0"]
    switch = "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:08.0/0000:03:00.0"
    monkeypatch.setattr(g.os.path, "realpath", lambda _: switch)
    assert g._parent_bridges("0000:03:00.0") == ["0000:00:01.0", "0000:01:00.0", "0000:02:08.0"]
