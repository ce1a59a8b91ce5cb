"""The driver role installs and pins the chosen source's own build of the driver version.

GPU hosts often have NVIDIA's CUDA repository configured beside the Ubuntu archive, and both carry
the same upstream driver version at different Debian revisions: Ubuntu's 535.183.01-0ubuntu0.22.04.1
(packages.ubuntu.com, jammy-updates) and NVIDIA's 535.183.01-0ubuntu1, with NVIDIA's fabric manager,
NSCQ and cuda-drivers-535 at 535.183.01-1 (install scripts for
developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64 pin exactly those strings). A
version glob (`535.183.01-*`) in the install and in the apt pin matched both builds, and apt took
the higher revision, NVIDIA's, for a role told to use the Ubuntu archive.

These tests build a private apt root (two flat repositories with hand-written indexes; no .deb
files), run roles/driver/tasks/resolve.yml against it with the real `apt-cache` (APT_CONFIG), render
the role's preferences template into it, and ask `apt-cache policy` which build apt would install.
The fixture's versions are the 535.288.01 of tests/fixtures/aptrepo/specs/nvidia-ubuntu-jammy.yml
and nvidia-cuda-ubuntu2204-535.yml.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from role_check import ROOT, run_playbook

pytestmark = pytest.mark.skipif(shutil.which("apt-get") is None, reason="apt not installed")

U = "535.288.01"
UBUNTU = f"{U}-0ubuntu0.22.04.1"  # the Ubuntu archive's build
NVIDIA = f"{U}-0ubuntu1"  # NVIDIA's CUDA repository's build of the driver
NVIDIA_1 = f"{U}-1"  # ... of fabric manager, NSCQ and cuda-drivers-535
ARCHIVE = "archive.ubuntu.com/ubuntu"
CUDA = "developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64"
TEMPLATE = ROOT / "roles" / "driver" / "templates" / "nvidia-driver.pref.j2"

# (name, version, Depends): the relationships that matter here, in the shape of the fixture specs.
UBUNTU_PACKAGES = [
    ("nvidia-headless-no-dkms-535", UBUNTU, f"libnvidia-compute-535 (= {UBUNTU})"),
    ("nvidia-utils-535", UBUNTU, f"libnvidia-compute-535 (>= {U})"),
    ("libnvidia-compute-535", UBUNTU, ""),
    ("nvidia-fabricmanager-535", UBUNTU, ""),
    ("libnvidia-nscq-535", UBUNTU, ""),
]
NVIDIA_PACKAGES = [
    ("nvidia-driver-535", NVIDIA, f"libnvidia-compute-535 (= {NVIDIA}), nvidia-utils-535 (= {NVIDIA})"),
    ("nvidia-utils-535", NVIDIA, ""),
    ("libnvidia-compute-535", NVIDIA, ""),
    ("nvidia-fabricmanager-535", NVIDIA_1, ""),
    ("libnvidia-nscq-535", NVIDIA_1, ""),
    ("cuda-drivers-535", NVIDIA_1, f"nvidia-driver-535 (>= {U})"),
]  # fmt: skip


def _flat_repo(base: Path, origin: str, packages: list[tuple[str, str, str]]) -> None:
    base.mkdir(parents=True)
    stanzas = []
    for name, version, depends in packages:
        stanzas.append(
            f"Package: {name}\nVersion: {version}\nArchitecture: amd64\nSection: restricted/misc\n"
            + (f"Depends: {depends}\n" if depends else "")
            + f"Filename: ./{name}_{version}_amd64.deb\nSize: 1000\n"
            + f"Description: {name} (gpufix test index, no package file)\n"
        )
    index = "\n".join(stanzas).encode()
    (base / "Packages").write_bytes(index)
    digest = hashlib.sha256(index).hexdigest()
    (base / "Release").write_text(
        f"Origin: {origin}\nLabel: {origin}\nDate: Mon, 12 Jan 2026 00:00:00 UTC\n"
        f"SHA256:\n {digest} {len(index)} Packages\n"
    )


def _apt_root(tmp_path: Path, ubuntu: list[tuple[str, str, str]] = UBUNTU_PACKAGES) -> Path:
    """A private apt root with both repositories; returns its APT_CONFIG file."""
    root = tmp_path / "aptroot"
    repos = tmp_path / "repos"
    _flat_repo(repos / ARCHIVE, "Ubuntu", ubuntu)
    _flat_repo(repos / CUDA, "NVIDIA", NVIDIA_PACKAGES)
    for d in ("etc/apt/preferences.d", "etc/apt/apt.conf.d", "var/lib/apt/lists/partial",
              "var/cache/apt/archives/partial", "var/lib/dpkg", "var/log/apt"):  # fmt: skip
        (root / d).mkdir(parents=True)
    (root / "var/lib/dpkg/status").write_text("")
    (root / "etc/apt/sources.list").write_text(
        f"deb [trusted=yes] file:{repos / ARCHIVE} ./\ndeb [trusted=yes] file:{repos / CUDA} ./\n"
    )
    conf = tmp_path / "apt.conf"
    conf.write_text(
        f'Dir "{root}/";\n'
        f'Dir::State::status "{root}/var/lib/dpkg/status";\n'
        f'APT::Sandbox::User "{getpass.getuser()}";\n'
        'APT::Architecture "amd64";\nAPT::Architectures { "amd64"; };\n'
        'Acquire::Languages "none";\nDebug::NoLocking "true";\n'
    )
    update = subprocess.run(
        ["apt-get", "update", "-q"], env=_env(conf), capture_output=True, text=True, check=False
    )
    assert update.returncode == 0, update.stdout + update.stderr
    return conf


def _env(conf: Path) -> dict[str, str]:
    return {**os.environ, "APT_CONFIG": str(conf), "LC_ALL": "C"}


def _resolve_and_pin(
    tmp_path: Path, conf: Path, vars_: dict[str, Any]
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """resolve.yml with the real apt-cache, then the role's pin template into the apt root."""
    out = tmp_path / "facts.json"
    pref = tmp_path / "aptroot" / "etc/apt/preferences.d" / "gpufix-nvidia-driver.pref"
    book = tmp_path / "pin.yml"
    book.write_text(
        "- hosts: localhost\n"
        "  gather_facts: false\n"
        "  tasks:\n"
        "    - ansible.builtin.include_role:\n"
        "        name: driver\n"
        "        tasks_from: resolve\n"
        "        public: true\n"
        "    - ansible.builtin.template:\n"
        f"        src: {TEMPLATE}\n"
        f"        dest: {pref}\n"
        '        mode: "0644"\n'
        "    - ansible.builtin.copy:\n"
        f"        dest: {out}\n"
        '        mode: "0644"\n'
        "        content: >-\n"
        "          {{ {'versions': gpufix_driver_debian_versions | default(none),\n"
        "              'install': _gpufix_driver_install_names | default(none)} | to_json }}\n"
    )
    base = {
        "gpufix_driver_branch": "535",
        "gpufix_driver_kernel_release": "5.15.0-151-generic",
        "gpufix_driver_fabricmanager": True,
    }
    r = run_playbook(tmp_path, book, {**base, **vars_}, check=False, env={"APT_CONFIG": str(conf)})
    return r, (json.loads(out.read_text()) if out.exists() else {})


def _candidate(conf: Path, name: str) -> str:
    policy = subprocess.run(
        ["apt-cache", "policy", name], env=_env(conf), capture_output=True, text=True, check=True
    ).stdout
    (line,) = [x for x in policy.splitlines() if x.strip().startswith("Candidate:")]
    return line.split()[1]


def test_a_version_glob_pin_takes_the_other_sources_build(tmp_path: Path) -> None:
    # The fixture reproduces the bug: the role's old pin (Pin: version 535.288.01-*) ranks both
    # builds 1001, and apt takes the higher revision, NVIDIA's.
    conf = _apt_root(tmp_path)
    (tmp_path / "aptroot/etc/apt/preferences.d/old.pref").write_text(
        f"Package: nvidia-* libnvidia-*\nPin: version {U}-*\nPin-Priority: 1001\n"
    )
    assert _candidate(conf, "nvidia-utils-535") == NVIDIA
    assert _candidate(conf, "nvidia-fabricmanager-535") == NVIDIA_1


@pytest.mark.slow
def test_ubuntu_source_installs_and_pins_the_archives_build(tmp_path: Path) -> None:
    conf = _apt_root(tmp_path)
    r, facts = _resolve_and_pin(tmp_path, conf, {"gpufix_driver_source": "ubuntu"})
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    for name in ("nvidia-utils-535", "libnvidia-compute-535", "nvidia-fabricmanager-535",
                 "libnvidia-nscq-535", "nvidia-headless-no-dkms-535"):  # fmt: skip
        assert _candidate(conf, name) == UBUNTU, name
    pref = (tmp_path / "aptroot/etc/apt/preferences.d/gpufix-nvidia-driver.pref").read_text()
    assert f"Pin: version {UBUNTU}\n" in pref
    assert f"Pin: version {U}-*" not in pref  # no glob: it would rank NVIDIA's build alike
    assert facts["versions"] == {
        "userspace": UBUNTU,
        "fabricmanager": {"nvidia-fabricmanager-535": UBUNTU, "libnvidia-nscq-535": UBUNTU},
    }
    assert facts["install"] == [
        f"nvidia-headless-no-dkms-535={UBUNTU}",
        f"nvidia-utils-535={UBUNTU}",
        f"nvidia-fabricmanager-535={UBUNTU}",
        f"libnvidia-nscq-535={UBUNTU}",
    ]


@pytest.mark.slow
def test_nvidia_source_pins_its_own_builds_and_keeps_the_rest_of_the_version(
    tmp_path: Path,
) -> None:
    conf = _apt_root(tmp_path)
    r, facts = _resolve_and_pin(
        tmp_path,
        conf,
        {"gpufix_driver_source": "nvidia", "gpufix_driver_nvidia_repo_uri": f"file:{tmp_path / 'repos' / CUDA}/"},
    )  # fmt: skip
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    assert facts["versions"] == {
        "userspace": NVIDIA,
        "fabricmanager": {"nvidia-fabricmanager-535": NVIDIA_1, "libnvidia-nscq-535": NVIDIA_1},
    }
    assert facts["install"] == [
        f"nvidia-driver-535={NVIDIA}",
        f"nvidia-fabricmanager-535={NVIDIA_1}",
        f"libnvidia-nscq-535={NVIDIA_1}",
    ]
    for name in ("nvidia-utils-535", "libnvidia-compute-535"):
        assert _candidate(conf, name) == NVIDIA, name
    for name in ("nvidia-fabricmanager-535", "libnvidia-nscq-535", "cuda-drivers-535"):
        assert _candidate(conf, name) == NVIDIA_1, name
    # cuda-drivers-535 (NVIDIA's -1 build) stays at the version as before, a priority below the
    # exact builds; the Ubuntu archive's build of the same version ranks below NVIDIA's.
    policy = subprocess.run(
        ["apt-cache", "policy", "cuda-drivers-535", "libnvidia-compute-535"],
        env=_env(conf), capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert f"{NVIDIA_1} 1000" in policy
    assert f"{NVIDIA} 1001" in policy and f"{UBUNTU} 1000" in policy


@pytest.mark.slow
def test_nscq_missing_from_the_chosen_source_at_the_version_is_refused(tmp_path: Path) -> None:
    # The Ubuntu archive without NSCQ at the driver's version; NVIDIA's NSCQ must not stand in.
    conf = _apt_root(tmp_path, [p for p in UBUNTU_PACKAGES if p[0] != "libnvidia-nscq-535"])
    r, facts = _resolve_and_pin(tmp_path, conf, {"gpufix_driver_source": "ubuntu"})
    out = r.stdout + r.stderr
    assert r.returncode != 0, out[-3000:]
    # Versions are taken only where fabric manager and NSCQ are both offered (a lagging NSCQ
    # leaves out a version, not the branch): here none is, and the message names which lacks.
    assert (
        "nvidia-fabricmanager-535 (535.288.01) and libnvidia-nscq-535 (none) share no version"
        in out
    )
    assert "set gpufix_driver_flavour to server" not in out  # fabric manager itself is there
    assert "nothing was pinned, installed or held" in out
    assert facts == {}
    assert not (tmp_path / "aptroot/etc/apt/preferences.d/gpufix-nvidia-driver.pref").exists()
