"""The driver role refuses, before it pins anything, a driver version fabric manager is not offered
at: fabric manager runs only at the driver's exact version, and Canonical's fabric manager follows
the -server driver's uploads (canonical/nvidia-graphics-drivers: 535-jammy @ 52ca25bc has desktop
535.216.01, 535.183.01, 535.161.07; 535-server-jammy @ f9c1433d has 535.216.03, 535.183.06,
535.161.08; canonical/apt-packaging-fabric-manager 535-jammy @ f00f2b03 is 535.216.03).
tool_outputs/apt_madison_535_jammy_fm_apart.txt is jammy-updates after the 535.216 uploads,
reconstructed: the versions come from those sources, the URL and pocket words are the shape
`apt-cache madison` prints (the role reads only the package, the version and whether the URL is
NVIDIA's repository or the PPA). An `apt-cache` on PATH answers from it (madison) and with a
record without Depends (show), which the transitional-package check once could not word a
message for. Before, the role wrote the pin and apt failed on
`nvidia-fabricmanager-535=535.216.01-*`.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from role_check import run_playbook, run_tasks

OUTPUTS = Path(__file__).parent / "fixtures" / "tool_outputs"
MADISON = OUTPUTS / "apt_madison_535_jammy_fm_apart.txt"
# Ubuntu's 530 is a transitional package built from the 535 source (canonical/nvidia-graphics-
# drivers 535-jammy @ 52ca25bc: nvidia-headless-no-dkms-530 depends on -535, Section libs, not
# oldlibs), so it is offered at 535.288.01 only.
TRANSITIONAL = OUTPUTS / "apt_madison_530_jammy_transitional.txt"
BASE = {
    "gpufix_driver_source": "ubuntu",
    "gpufix_driver_branch": "535",
    "gpufix_driver_kernel_release": "5.15.0-126-generic",
}


def fake_apt_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, madison: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "apt-cache"
    shim.write_text(
        "#!/bin/sh\n"
        'cmd="$1"; shift\n'
        'if [ "$cmd" = madison ]; then\n'
        f'  for p in "$@"; do grep "^$p |" "{madison}" | sed "s/^/ /"; done\n'
        'elif [ "$cmd" = show ]; then\n'
        '  printf "Package: %s\\nSection: restricted/libs\\n" "${1%%=*}"\n'
        "fi\n"
    )
    shim.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")


# The role installs NSCQ beside fabric manager, at the build its source offers for the driver's
# version (tests/test_driver_revision.py): canonical/apt-packaging-libnvidia-nscq 535-jammy @
# 9e4e0e68 is 535.216.03-0ubuntu0.22.04.1, uploaded with fabric manager.
NSCQ = (
    "libnvidia-nscq-535 | 535.216.03-0ubuntu0.22.04.1 | "
    "http://archive.ubuntu.com/ubuntu jammy-updates/multiverse amd64 Packages\n"
)


@pytest.fixture()
def apt_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    madison = tmp_path / "madison.txt"
    madison.write_text(MADISON.read_text() + NSCQ)
    fake_apt_cache(tmp_path, monkeypatch, madison)


def resolve(tmp_path: Path, vars_: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    return run_tasks(tmp_path, "driver", "resolve", {**BASE, **vars_})


@pytest.mark.slow
@pytest.mark.usefixtures("apt_cache")
def test_desktop_driver_with_fabric_manager_at_another_version_is_refused(tmp_path: Path) -> None:
    r = resolve(tmp_path, {"gpufix_driver_flavour": "", "gpufix_driver_fabricmanager": True})
    out = r.stdout + r.stderr
    assert r.returncode != 0, out[-3000:]
    assert (
        "nvidia-headless-no-dkms-535 (535.216.01), nvidia-fabricmanager-535 (535.216.03) and "
        "libnvidia-nscq-535 (535.216.03) share no version" in out
    )
    assert "share no version" in out and "nothing was pinned, installed or held" in out
    assert "set gpufix_driver_flavour to server." in out


@pytest.mark.slow
@pytest.mark.usefixtures("apt_cache")
@pytest.mark.parametrize(
    "vars_",
    [
        {"gpufix_driver_flavour": "server", "gpufix_driver_fabricmanager": True},
        {"gpufix_driver_flavour": "", "gpufix_driver_fabricmanager": False},
    ],
    ids=["server-with-fabric-manager", "desktop-without"],
)
def test_a_version_both_are_offered_at_or_no_fabric_manager_resolves(
    tmp_path: Path, vars_: dict[str, Any]
) -> None:
    r = resolve(tmp_path, vars_)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    assert "share no version" not in r.stdout


@pytest.mark.slow
def test_a_branch_offered_only_as_another_branch_s_transitional_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_apt_cache(tmp_path, monkeypatch, TRANSITIONAL)
    r = resolve(tmp_path, {"gpufix_driver_branch": "530", "gpufix_driver_flavour": ""})
    out = r.stdout + r.stderr
    assert r.returncode != 0, out[-3000:]
    assert "nvidia-headless-no-dkms-530 of branch 530 is not in the Ubuntu archive" in out
    assert "offered only at 535.288.01, a version of another branch: a transitional" in out


# A host's apt-cache output is data: versions that carry Jinja reach the role's messages as text.
HOSTILE = (
    "nvidia-headless-no-dkms-535 | 535.216.01-0ubuntu0.22.04.1 | {u} jammy-updates/restricted amd64 Packages\n"
    "nvidia-headless-no-dkms-530 | 535.1{{{{ lookup('pipe', 'touch {m}') }}}}-1 | {u} jammy-updates/restricted amd64 Packages\n"
    "nvidia-fabricmanager-535 | 535.216.03{{{{ lookup('pipe', 'touch {m}') }}}}-0ubuntu1 | {u} jammy-updates/multiverse amd64 Packages\n"
)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("vars_", "where"),
    [
        ({"gpufix_driver_fabricmanager": True}, "share no version"),
        ({"gpufix_driver_branch": "530"}, "offered only at"),
    ],
    ids=["fabric-manager-message", "transitional-message"],
)
def test_jinja_in_the_host_s_package_index_is_never_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, vars_: dict[str, Any], where: str
) -> None:
    marker = tmp_path / "pwned"
    madison = tmp_path / "madison.txt"
    madison.write_text(HOSTILE.format(u="http://archive.ubuntu.com/ubuntu", m=marker))
    fake_apt_cache(tmp_path, monkeypatch, madison)
    r = resolve(tmp_path, {"gpufix_driver_flavour": "", **vars_})
    out = r.stdout + r.stderr
    assert r.returncode != 0 and where in out, out[-3000:]
    assert "lookup('pipe'" in out  # shown as text
    assert not marker.exists()


# NVIDIA's repository keeps every version; a review: when NSCQ lags behind fabric manager at the
# newest version, the role picked that version and then refused it ("NSCQ not offered"), where
# the newest version all three are offered at is the one to take.
NVIDIA_URL = "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64"
LAGGING_NSCQ = "".join(
    f"{name} | {version} | {NVIDIA_URL}  Packages\n"
    for name, version in [
        ("nvidia-driver-550", "550.90.07-0ubuntu1"),
        ("nvidia-driver-550", "550.54.15-0ubuntu1"),
        ("nvidia-fabricmanager-550", "550.90.07-1"),
        ("nvidia-fabricmanager-550", "550.54.15-1"),
        ("libnvidia-nscq-550", "550.54.15-1"),
    ]
)


@pytest.mark.slow
def test_a_companion_that_lags_behind_leaves_out_the_newest_version_not_the_branch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    madison = tmp_path / "madison.txt"
    madison.write_text(LAGGING_NSCQ)
    fake_apt_cache(tmp_path, monkeypatch, madison)
    book = tmp_path / "resolve_and_show.yml"
    book.write_text(
        "- hosts: localhost\n  gather_facts: true\n  tasks:\n"
        "    - ansible.builtin.include_role: {name: driver, tasks_from: resolve}\n"
        "    - ansible.builtin.debug: {var: gpufix_driver_debian_versions}\n"
    )
    chosen = {
        "gpufix_driver_source": "nvidia",
        "gpufix_driver_branch": "550",
        "gpufix_driver_flavour": "",
        "gpufix_driver_fabricmanager": True,
    }
    r = run_playbook(tmp_path, book, {**BASE, **chosen}, check=True)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-3000:]
    assert '"userspace": "550.54.15-0ubuntu1"' in out, out[-3000:]
    assert (
        '"libnvidia-nscq-550": "550.54.15-1"' in out and "550.90.07" not in out.split("debug")[-1]
    )


@pytest.mark.slow
def test_a_version_asked_for_whose_companion_lags_names_the_companion(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A review: the driver at 550.90.07 was said not to be in the repository ("available:
    550.54.15") when only NSCQ was missing there."""
    madison = tmp_path / "madison.txt"
    madison.write_text(LAGGING_NSCQ)
    fake_apt_cache(tmp_path, monkeypatch, madison)
    chosen = {
        "gpufix_driver_source": "nvidia",
        "gpufix_driver_branch": "550",
        "gpufix_driver_version": "550.90.07",
        "gpufix_driver_flavour": "",
        "gpufix_driver_fabricmanager": True,
    }
    r = resolve(tmp_path, chosen)
    out = r.stdout + r.stderr
    assert r.returncode != 0, out[-3000:]
    assert "libnvidia-nscq-550 is not offered at 550.90.07 by the NVIDIA repository" in out
    assert "is not in the NVIDIA repository" not in out
