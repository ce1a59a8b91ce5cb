"""The facts module's parsers on recorded real-format tool outputs, and on garbage."""

from __future__ import annotations

from pathlib import Path

import pytest
from gpufix.facts.local import load_module
from hypothesis import given, settings
from hypothesis import strategies as st

OUT = Path(__file__).parent / "fixtures" / "tool_outputs"
g = load_module()


def out(name: str) -> str:
    return (OUT / name).read_text()


def test_os_release_ubuntu_releases() -> None:
    assert g.parse_os_release(out("os_release_bionic.txt")) == {
        "id": "ubuntu",
        "id_like": ["debian"],
        "version_id": "18.04",
        "codename": "bionic",
        "pretty_name": "Ubuntu 18.04.6 LTS",
    }
    assert g.parse_os_release(out("os_release_focal.txt"))["codename"] == "focal"
    assert g.parse_os_release(out("os_release_jammy.txt"))["version_id"] == "22.04"


# Shapes of real files: RHEL 8 (ID_LIKE fedora, the codename only in VERSION), Rocky 9, Fedora
# (no ID_LIKE at all), Linux Mint 22.3 (its own VERSION_CODENAME beside the Ubuntu one it uses).
RHEL8 = (
    'NAME="Red Hat Enterprise Linux"\nVERSION="8.8 (Ootpa)"\nID="rhel"\nID_LIKE="fedora"\n'
    'VERSION_ID="8.8"\nPLATFORM_ID="platform:el8"\n'
    'PRETTY_NAME="Red Hat Enterprise Linux 8.8 (Ootpa)"\n'
)
ROCKY9 = 'NAME="Rocky Linux"\nVERSION="9.4 (Blue Onyx)"\nID="rocky"\nID_LIKE="rhel centos fedora"\n'
FEDORA = 'NAME="Fedora Linux"\nVERSION="40 (Server Edition)"\nID=fedora\nVERSION_ID=40\n'
MINT = (
    'NAME="Linux Mint"\nVERSION="22.3 (Zena)"\nID=linuxmint\nID_LIKE="ubuntu debian"\n'
    'VERSION_ID="22.3"\nVERSION_CODENAME=zena\nUBUNTU_CODENAME=noble\n'
)


@pytest.mark.parametrize(
    ("text", "id_like", "codename"),
    [
        (RHEL8, ["fedora"], "ootpa"),
        (ROCKY9, ["rhel", "centos", "fedora"], "blue"),
        (FEDORA, [], "server"),
        (MINT, ["ubuntu", "debian"], "noble"),
    ],
)
def test_os_release_id_like_and_the_ubuntu_codename_first(
    text: str, id_like: list[str], codename: str
) -> None:
    got = g.parse_os_release(text)
    assert (got["id_like"], got["codename"]) == (id_like, codename)


def test_os_release_codename_from_version_when_no_codename_key() -> None:
    text = 'ID=ubuntu\nVERSION="18.04.6 LTS (Bionic Beaver)"\nVERSION_ID="18.04"\n'
    assert g.parse_os_release(text)["codename"] == "bionic"


def test_cpuinfo() -> None:
    assert g.parse_cpuinfo(out("cpuinfo_intel.txt")) == {
        "vendor": "GenuineIntel",
        "model": "Intel(R) Xeon(R) Gold 6248R CPU @ 3.00GHz",
    }


@pytest.mark.parametrize(
    ("name", "version", "flavor"),
    [
        ("proc_driver_version_470.txt", "470.182.03", "proprietary"),
        ("proc_driver_version_515.txt", "515.105.01", "proprietary"),
        ("proc_driver_version_535_open.txt", "535.154.05", "open"),
        ("proc_driver_version_545.txt", "545.29.06", "proprietary"),
    ],
)
def test_proc_driver_version(name: str, version: str, flavor: str) -> None:
    assert g.parse_proc_driver_version(out(name)) == {"version": version, "flavor": flavor}


def test_proc_driver_version_without_nvrm_line() -> None:
    assert g.parse_proc_driver_version("GCC version: gcc 7.5.0\n") is None
    assert g.parse_proc_driver_version("NVRM version: NVIDIA UNIX x86_64 Kernel Mod") is None


def test_query_2x3090() -> None:
    gpus = g.gpus_from_query(g.parse_nvidia_smi_query(out("query_2x3090.csv")))
    assert [x["index"] for x in gpus] == [0, 1]
    assert gpus[0] == {
        "index": 0,
        "name": "NVIDIA GeForce RTX 3090",
        "pci_bus_id": "00000000:01:00.0",
        "memory_mib": 24576,
        "compute_capability": "8.6",
        "uuid": "GPU-5a3b1c7e-1f0d-8e2a-4c6b-9d7e3f2a1b0c",
    }


def test_query_8xa100_and_4x4090() -> None:
    a100 = g.gpus_from_query(g.parse_nvidia_smi_query(out("query_8xa100.csv")))
    assert len(a100) == 8 and {x["compute_capability"] for x in a100} == {"8.0"}
    assert a100[7]["memory_mib"] == 81920
    rtx = g.gpus_from_query(g.parse_nvidia_smi_query(out("query_4x4090.csv")))
    assert [x["pci_bus_id"][-7:] for x in rtx] == ["05:00.0", "06:00.0", "09:00.0", "0A:00.0"]


def test_query_without_compute_cap_marks_it_unknown() -> None:
    fields = [f for f in g.GPU_QUERY_FIELDS if f != "compute_cap"]
    gpus = g.gpus_from_query(g.parse_nvidia_smi_query(out("query_470_fallback.csv"), fields))
    assert len(gpus) == 2
    assert g.is_unknown(gpus[0]["compute_capability"])
    assert "compute_cap" in gpus[0]["compute_capability"]["unknown"]
    # The driver's complaint about the field is not a row.
    assert g.parse_nvidia_smi_query(out("query_470_invalid_field.txt")) == []


def test_query_odd_values_read_as_none() -> None:
    gpus = g.gpus_from_query(g.parse_nvidia_smi_query(out("query_odd_values.csv")))
    assert gpus[0]["memory_mib"] is None
    assert gpus[1]["compute_capability"] is None


def test_query_truncated_keeps_whole_rows_only() -> None:
    gpus = g.gpus_from_query(g.parse_nvidia_smi_query(out("query_truncated.csv")))
    assert 1 <= len(gpus) < 8
    assert all(x["uuid"] and x["uuid"].startswith("GPU-") for x in gpus[:-1])


@pytest.mark.parametrize(
    ("name", "needle"),
    [
        ("nvml_mismatch.txt", "Driver/library version mismatch"),
        ("nvml_mismatch_old.txt", "Driver/library version mismatch"),
        ("nvidia_smi_no_driver.txt", "couldn't communicate with the NVIDIA driver"),
    ],
)
def test_nvml_errors(name: str, needle: str) -> None:
    err = g.parse_nvml_error(out(name))
    assert err is not None and needle in err
    assert g.parse_nvidia_smi_query(out(name)) == []


def test_no_nvml_error_in_normal_output() -> None:
    assert g.parse_nvml_error(out("query_2x3090.csv")) is None


def test_compute_apps() -> None:
    apps = g.parse_compute_apps(out("compute_apps.csv"))
    assert apps[0] == {
        "pid": 48213,
        "name": "/opt/venvs/train/bin/python3.8",
        "gpu_uuid": "GPU-5a3b1c7e-1f0d-8e2a-4c6b-9d7e3f2a1b0c",
        "used_mib": 1234,
    }


def test_topo_phb() -> None:
    topo = g.parse_topo_matrix(out("topo_2x3090_phb.txt"))
    assert topo == {"matrix": {"GPU0": {"GPU1": "PHB"}, "GPU1": {"GPU0": "PHB"}}, "worst": "PHB"}


def test_topo_nvlink_ignores_nic_columns() -> None:
    topo = g.parse_topo_matrix(out("topo_8xa100_nv12.txt"))
    assert sorted(topo["matrix"]) == [f"GPU{i}" for i in range(8)]
    assert all(set(row.values()) == {"NV12"} for row in topo["matrix"].values())
    assert all(len(row) == 7 for row in topo["matrix"].values())
    assert topo["worst"] == "NV12"


def test_topo_switch_pix_pxb() -> None:
    topo = g.parse_topo_matrix(out("topo_4x4090_plx.txt"))
    assert topo["matrix"]["GPU0"] == {"GPU1": "PIX", "GPU2": "PXB", "GPU3": "PXB"}
    assert topo["worst"] == "PXB"


def test_topo_old_driver_with_ansi_header() -> None:
    topo = g.parse_topo_matrix(out("topo_470_ansi_sys.txt"))
    assert topo == {"matrix": {"GPU0": {"GPU1": "SYS"}, "GPU1": {"GPU0": "SYS"}}, "worst": "SYS"}


def test_topo_single_gpu_and_truncated() -> None:
    assert g.parse_topo_matrix(out("topo_single_gpu.txt")) == {
        "matrix": {"GPU0": {}},
        "worst": None,
    }
    truncated = g.parse_topo_matrix(out("topo_truncated.txt"))
    assert truncated["worst"] in (None, "PIX", "PXB")


def test_topology_rank_orders_links() -> None:
    ranks = [g.topology_rank(x) for x in ("NV12", "PIX", "PXB", "PHB", "NODE", "SYS")]
    assert ranks == sorted(ranks) and len(set(ranks)) == 6
    assert g.topology_rank("X") is None


def test_p2p_read_matrix() -> None:
    ok = g.parse_topo_p2p(out("p2p_r_2x3090.txt"))
    assert ok == {"GPU0": {"GPU1": "OK"}, "GPU1": {"GPU0": "OK"}}
    cns = g.parse_topo_p2p(out("p2p_r_4x4090.txt"))
    assert cns["GPU3"] == {"GPU0": "CNS", "GPU1": "CNS", "GPU2": "CNS"}
    assert len(g.parse_topo_p2p(out("p2p_r_8xa100.txt"))) == 8


def test_lspci_acs_on_behind_plx_switch() -> None:
    pcie = g.summarise_pcie(out("lspci_vvv_plx_acs_on.txt"))
    assert pcie["gpu_bdfs"] == ["0000:05:00.0", "0000:06:00.0", "0000:09:00.0", "0000:0a:00.0"]
    assert pcie["gpus_behind_switch"] is True
    by_bdf = {b["bdf"]: b for b in pcie["bridges"]}
    # The root port and the six downstream ports carry ACS; upstream ports do not.
    assert len(by_bdf) == 7 and "0000:01:00.0" not in by_bdf
    assert all(b["acs_enabled"] and b["above_gpu"] for b in by_bdf.values())
    ctl = by_bdf["0000:04:08.0"]["acs_ctl"]
    assert ctl["ReqRedir"] is True and ctl["TransBlk"] is False
    assert by_bdf["0000:04:08.0"]["acs_cap"]["DirectTrans"] is True


def test_lspci_acs_off() -> None:
    pcie = g.summarise_pcie(out("lspci_vvv_plx_acs_off.txt"))
    assert pcie["bridges"] and not any(b["acs_enabled"] for b in pcie["bridges"])


def test_lspci_above_gpu_uses_given_parents() -> None:
    text = out("lspci_vvv_plx_acs_on.txt")
    pcie = g.summarise_pcie(text, ["0000:05:00.0"], {"0000:05:00.0": ["0000:00:01.0"]})
    above = {b["bdf"] for b in pcie["bridges"] if b["above_gpu"]}
    assert above == {"0000:00:01.0"}
    assert pcie["gpus_behind_switch"] is False


def test_lspci_without_root_is_unknown() -> None:
    pcie = g.summarise_pcie(out("lspci_vvv_nonroot.txt"))
    assert g.is_unknown(pcie["bridges"]) and "root" in pcie["bridges"]["unknown"]


def test_lspci_without_domain() -> None:
    (bridge,) = g.parse_lspci_acs(out("lspci_vvv_no_domain.txt"))
    assert bridge["bdf"] == "0000:00:03.0" and bridge["acs_enabled"] is True


@pytest.mark.parametrize(
    ("raw", "bdf"),
    [
        ("00000000:01:00.0", "0000:01:00.0"),
        ("01:00.0", "0000:01:00.0"),
        ("0000:0A:00.0", "0000:0a:00.0"),
        ("10000:01:00.0", "10000:01:00.0"),  # a VMD domain
    ],
)
def test_normalise_bdf(raw: str, bdf: str) -> None:
    assert g.normalise_bdf(raw) == bdf


def test_dkms_old_and_new_formats() -> None:
    old = g.parse_dkms_status(out("dkms_status_old.txt"))
    assert old[1] == {
        "module": "nvidia",
        "version": "470.182.03",
        "kernel": "5.4.0-150-generic",
        "arch": "x86_64",
        "status": "installed",
    }
    new = g.parse_dkms_status(out("dkms_status_new.txt"))
    assert [(e["module"], e["kernel"], e["status"]) for e in new] == [
        ("nvidia", "5.15.0-91-generic", "installed"),
        ("nvidia", "5.4.0-169-generic", "installed"),
        ("nvidia-fs", None, "added"),
    ]
    assert g.parse_dkms_status(out("dkms_status_error.txt")) == []


def test_mokutil() -> None:
    assert g.parse_mokutil(out("mokutil_enabled.txt")) == {"enabled": True, "efi": True}
    assert g.parse_mokutil(out("mokutil_disabled.txt")) == {"enabled": False, "efi": True}
    assert g.parse_mokutil(out("mokutil_no_efi.txt")) == {"enabled": False, "efi": False}
    assert g.parse_mokutil("mokutil: command failed") == {"enabled": None, "efi": None}


def test_apt_policy() -> None:
    assert g.parse_apt_policy(out("apt_policy_hwe_bionic.txt")) == {
        "installed": None,
        "candidate": "5.4.0.150.167~18.04.121",
    }
    assert g.parse_apt_policy(out("apt_policy_hwe_focal_installed.txt"))["installed"] == (
        "5.15.0.91.101~20.04.1"
    )


def test_apt_policy_version_table_says_what_is_still_installable() -> None:
    """apt-cache policy (apt-cache(8)): a version listed only under /var/lib/dpkg/status is in no
    index; an Ubuntu pocket keeps one version per package, so a superseded driver is gone."""
    superseded = g.parse_apt_policy_table(out("apt_policy_driver_470_superseded.txt"))
    assert superseded["470.223.02-0ubuntu0.22.04.1"] == ["/var/lib/dpkg/status"]
    assert g.version_installable(superseded, "470.223.02-0ubuntu0.22.04.1") is False
    assert g.version_installable(superseded, "470.256.02-0ubuntu0.22.04.1") is True
    assert g.version_installable(superseded, "470.1-nope") is False
    current = g.parse_apt_policy_table(out("apt_policy_driver_535_current.txt"))
    assert g.version_installable(current, "535.274.02-0ubuntu0.22.04.1") is True
    assert g.parse_apt_policy_table("") == {}


def test_driver_origin_from_the_index_else_the_revision() -> None:
    """Which source a kept driver is resolved from. Revisions as each source publishes them:
    Ubuntu's updates 0ubuntu0.22.04.1 (the fixture's jammy-updates), the graphics-drivers PPA
    0ubuntu0~gpu22.04.1, NVIDIA's CUDA repository nvidia-driver-550 at 0ubuntu1 and
    cuda-drivers-550 at -1 (tests/fixtures/aptrepo/specs/nvidia-cuda-ubuntu2204.yml)."""
    current = g.parse_apt_policy_table(out("apt_policy_driver_535_current.txt"))
    v = "535.274.02-0ubuntu0.22.04.1"
    assert g.driver_origin(v, current[v], {}) == "ubuntu"
    nvidia = [
        "600 https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64  Packages"
    ]
    assert g.driver_origin("550.90.07-0ubuntu1", nvidia, {}) == "nvidia"
    ppa = [
        "500 https://ppa.launchpadcontent.net/graphics-drivers/ppa/ubuntu jammy/main amd64 Packages"
    ]
    assert g.driver_origin("550.120-0ubuntu0~gpu22.04.1", ppa, {}) == "ppa"
    # only dpkg's status still lists it: the revision tells
    status = ["/var/lib/dpkg/status"]
    assert g.driver_origin("470.223.02-0ubuntu0.22.04.1", status, {}) == "ubuntu"
    assert g.driver_origin("550.120-0ubuntu0~gpu22.04.1", status, {}) == "ppa"
    assert g.driver_origin("550.54.15-0ubuntu1", status, {"cuda-drivers-550": "550.54.15-1"}) == (
        "nvidia"
    )
    # 0ubuntu1 is also what Ubuntu's release pocket publishes: without cuda-drivers, unknown
    assert g.driver_origin("535.54.03-0ubuntu1", status, {"nvidia-driver-535": "x"}) is None


def test_driver_package_a_rollback_reinstalls() -> None:
    installed = {"libnvidia-compute-470": "1", "nvidia-driver-470": "1", "nvidia-utils-470": "1"}
    assert g.driver_package(installed) == "nvidia-driver-470"
    assert g.driver_package({"libnvidia-compute-535-server": "1"}) == "libnvidia-compute-535-server"
    assert g.driver_package({"bash": "5"}) is None


def test_lspci_port_types() -> None:
    """lspci's Express capability line names root, upstream and downstream ports."""
    devices = {d["bdf"]: d for d in g.parse_lspci_devices(out("lspci_vvv_plx_acs_on.txt"))}
    assert devices["0000:00:01.0"]["port"] == "root"
    assert devices["0000:01:00.0"]["port"] == "upstream"
    assert devices["0000:02:08.0"]["port"] == "downstream"
    bridges = {b["bdf"]: b["port"] for b in g.parse_lspci_acs(out("lspci_vvv_plx_acs_on.txt"))}
    assert set(bridges.values()) == {"root", "downstream"}


def test_dpkg_query_keeps_installed_and_held_only() -> None:
    pkgs = g.parse_dpkg_query(out("dpkg_query_bionic_470.txt"))
    assert pkgs["nvidia-driver-470"] == "470.182.03-0ubuntu0.18.04.1"
    assert "nvidia-driver-460" not in pkgs  # 'rc': removed, config files left
    assert g.upstream_version(pkgs["libnvidia-compute-470"]) == "470.182.03"


def test_apt_config_blacklist() -> None:
    cfg = g.parse_apt_config_dump(out("apt_config_dump_blacklist.txt"))
    assert cfg["APT::Periodic::Unattended-Upgrade"] == "1"
    patterns = cfg["Unattended-Upgrade::Package-Blacklist"]
    assert patterns == ["nvidia-", "libnvidia-"]
    assert g.blacklist_covers(patterns, "nvidia-driver-535")
    assert g.blacklist_covers(patterns, "libnvidia-compute-535")
    default = g.parse_apt_config_dump(out("apt_config_dump_default.txt"))
    assert default["Unattended-Upgrade::Package-Blacklist"] == []
    assert not g.blacklist_covers([], "nvidia-driver-535")
    assert not g.blacklist_covers(["linux-"], "nvidia-driver-535")
    # the driver role's entries (roles/driver/templates/unattended-upgrades-nvidia.j2)
    ours = ["^nvidia-(?!container)", "^libnvidia-(?!container)"]
    assert all(g.blacklist_covers(ours, n) for n in g.driver_package_names({}))
    for toolkit in (
        "nvidia-container-toolkit",
        "libnvidia-container1",
        "libnvidia-container-tools",
    ):
        assert not g.blacklist_covers(ours, toolkit)  # the toolkit keeps its security updates


def test_kernel_log_counts() -> None:
    assert g.parse_kernel_log(out("dmesg_xid_aer.txt")) == {"xid": 1, "nvrm": 3, "aer": 2}


def test_nccl_conf() -> None:
    assert g.parse_kv_conf(out("nccl_conf.txt")) == {
        "NCCL_SOCKET_IFNAME": "eno1",
        "NCCL_IB_DISABLE": "1",
        "NCCL_DEBUG": "INFO",
    }


def test_cmdline_and_version_line() -> None:
    cmd = g.parse_cmdline("BOOT_IMAGE=/vmlinuz ro quiet intel_iommu=on iommu=pt")
    assert cmd["intel_iommu"] == "on" and cmd["iommu"] == "pt" and cmd["quiet"] is True
    assert g.parse_version_line("Docker version 24.0.7, build afdd53b") == "24.0.7"
    assert g.parse_version_line("NVIDIA Container Toolkit CLI version 1.14.3") == "1.14.3"
    assert g.parse_version_line("no digits") is None


TEXT_PARSERS = [
    "parse_os_release",
    "parse_cpuinfo",
    "parse_proc_driver_version",
    "parse_nvml_error",
    "parse_gpu_errors",
    "parse_nvidia_smi_query",
    "parse_compute_apps",
    "parse_topo_matrix",
    "parse_topo_p2p",
    "parse_lspci_acs",
    "parse_lspci_devices",
    "summarise_pcie",
    "parse_dkms_status",
    "parse_mokutil",
    "parse_apt_policy",
    "parse_apt_policy_table",
    "parse_dpkg_query",
    "parse_showhold",
    "parse_kv_conf",
    "parse_kernel_log",
    "parse_apt_config_dump",
    "parse_modprobe_blacklist",
    "parse_cmdline",
    "parse_version_line",
    "driver_summary",
]
SAMPLES = sorted(p.read_text() for p in OUT.iterdir())

# Garbage: arbitrary text, and cut or spliced real outputs (truncation is the common case).
garbage = st.one_of(
    st.text(),
    st.text(alphabet=" \t\n:,.=+-_/()[]X0123456789abcdefGPUNVSYSACSCtl"),
    st.builds(lambda s, i: s[: i % (len(s) + 1)], st.sampled_from(SAMPLES), st.integers(0, 10**6)),
    st.builds(
        lambda a, b: a[: len(a) // 2] + b[len(b) // 2 :],
        st.sampled_from(SAMPLES),
        st.sampled_from(SAMPLES),
    ),
)


@pytest.mark.parametrize("name", TEXT_PARSERS)
@settings(max_examples=60, deadline=None)
@given(text=garbage)
def test_parsers_never_raise(name: str, text: str) -> None:
    getattr(g, name)(text)


def test_driver_summary_consistent() -> None:
    installed = g.parse_dpkg_query(out("dpkg_query_bionic_470.txt"))
    d = g.driver_summary(
        out("proc_driver_version_470.txt"), "470.182.03", "470.182.03\n", installed
    )
    assert d["kernel_module"] == d["userspace"] == "470.182.03"
    assert d["mismatch"] is False and d["nvml_error"] is None
    assert d["userspace_sources"] == {
        "libnvidia_ml": "470.182.03",
        "nvidia_smi": "470.182.03",
        "dpkg": "470.182.03",
    }


def test_driver_summary_nvml_mismatch() -> None:
    d = g.driver_summary(out("proc_driver_version_470.txt"), "470.199.02", out("nvml_mismatch.txt"))
    assert d["mismatch"] is True and d["userspace"] == "470.199.02"
    assert d["nvml_error"] == "Failed to initialize NVML: Driver/library version mismatch"
    assert d["userspace_sources"]["nvidia_smi"] is None


def test_driver_summary_versions_differ_without_nvml_error() -> None:
    d = g.driver_summary(out("proc_driver_version_535_open.txt"), "535.161.07", None)
    assert d["mismatch"] is True and d["flavor"] == "open"


def test_driver_summary_no_module() -> None:
    d = g.driver_summary(None, None, out("nvidia_smi_no_driver.txt"))
    assert d["kernel_module"] == {"unknown": "no NVIDIA kernel module loaded"}
    assert d["mismatch"] is None and "couldn't communicate" in d["nvml_error"]


def test_one_topology_ranking_controller_and_module_agree() -> None:
    """The controller's ranking (gpufix.facts.topology) and the shipped module's copy agree."""
    from gpufix.facts import topology

    assert dict(topology.LINK_RANK) == g.TOPOLOGY_RANK
    for link in ("NV12", "PIX", "PXB", "PHB", "NODE", "SYS", "SOC", "X", "", "bogus"):
        assert topology.rank(link) == g.topology_rank(link), link


def test_worst_link_knows_soc_and_nvlink() -> None:
    from gpufix.facts import topology

    old = {"GPU0": {"GPU1": "SOC"}, "GPU1": {"GPU0": "SOC"}}
    assert topology.worst_link(old) == "SYS"
    assert topology.worst_link({"GPU0": {"GPU1": "NV12"}, "GPU1": {"GPU0": "PIX"}}) == "PIX"
    assert topology.worst_link({"GPU0": {}}) is None and topology.worst_link("x") is None
    assert topology.canonical("NV4") == "NV" and topology.canonical("X") is None


def test_nccl_files_gpufix_wrote_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """roles/nccl_profile's marker line names the file as gpufix's (nccl.gpufix_written): its
    settings are gpufix's own interim or fix, not an administrator's (facts module 1.4.0)."""
    texts = {
        "/etc/nccl.conf": "# gpufix nccl_profile: profiles no-p2p\nNCCL_P2P_DISABLE=1\n",
        "/home/u/.nccl.conf": "NCCL_SHM_DISABLE=1\n",
    }

    class Ctx:
        def read(self, path: str) -> str:
            return texts[path]

        def read_or_none(self, path: str) -> str | None:
            return texts.get(path)

    monkeypatch.setenv("HOME", "/home/u")
    monkeypatch.setattr(g.os.path, "exists", lambda p: p in texts)
    got = g.g_nccl(Ctx(), {})
    assert got["gpufix_written"] == ["/etc/nccl.conf"]
    assert got["files"]["/home/u/.nccl.conf"] == {"NCCL_SHM_DISABLE": "1"}
