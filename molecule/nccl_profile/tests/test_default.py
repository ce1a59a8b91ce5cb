"""nccl_profile on Debian 12: the KB's profile names composed, backup once, no debug knobs."""

import os


def _settings(host):
    text = host.file("/etc/nccl.conf").content_string
    return [ln for ln in text.splitlines() if ln and not ln.startswith("#")]


def test_profiles_compose_in_order(host):
    assert _settings(host) == [
        "NCCL_P2P_LEVEL=PXB",
        "NCCL_SOCKET_IFNAME==eth0",
        "NCCL_IB_DISABLE=1",
        "NCCL_SHM_DISABLE=1",
        "NCCL_PXN_DISABLE=1",
        "NCCL_MNNVL_ENABLE=0",
        "NCCL_IB_TIMEOUT=22",
        # kept from the administrator's file: keys no profile sets
        "NCCL_IB_PCI_RELAXED_ORDERING=1",
        "NCCL_IGNORE_CPU_AFFINITY=1",
        "NCCL_TOPO_FILE=/opt/microsoft/ndv5/topo.xml",
    ]


def test_host_text_is_never_templated(host):
    # The original's NCCL_ALGO line holds a Jinja lookup: not kept, and never run here.
    assert not host.file("/etc/nccl.conf").contains("NCCL_ALGO")
    assert not os.path.exists("/tmp/gpufix-nccl-templated")


def test_no_comment_line_holds_an_equals_sign(host):
    # NCCL before 2.26.2 parses any line with "=", comment or not (NVIDIA/nccl#1540).
    text = host.file("/etc/nccl.conf").content_string
    comments = [ln for ln in text.splitlines() if ln.lstrip().startswith("#")]
    assert comments, "the file explains its profiles in comments"
    assert [ln for ln in comments if "=" in ln] == []


def test_each_profile_says_when_and_what_it_costs(host):
    conf = host.file("/etc/nccl.conf")
    assert conf.mode == 0o644
    assert conf.contains("^# Ansible managed")
    assert conf.contains("^# --- profile p2p-level-pxb ---$")
    assert conf.contains("^# --- profile pxn-off ---$")
    assert conf.contains("^# --- profile mnnvl-off ---$")
    assert conf.contains("^# when: P2P works between GPUs behind the same PCIe switch")
    assert conf.contains("^# cost: Traffic between GPUs on different root complexes")
    assert conf.contains("^# source: https://docs.nvidia.com/deeplearning/nccl/")


def test_no_debug_knobs(host):
    assert not [s for s in _settings(host) if s.startswith("NCCL_DEBUG")]


def test_foreign_config_backed_up_once(host):
    backup = host.file("/etc/nccl.conf.gpufix-orig")
    assert backup.exists
    # The administrator's file, not one gpufix wrote on a later run.
    assert backup.content_string.startswith(
        "NCCL_SOCKET_IFNAME=eth0\nNCCL_IB_PCI_RELAXED_ORDERING=1\n"
    )


def test_single_gpu_workaround_removed(host):
    assert not host.file("/etc/profile.d/gpufix-single-gpu.sh").exists
