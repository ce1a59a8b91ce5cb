"""The driver role takes the modules metapackage (linux-modules-nvidia-F-FLAVOUR) only when apt
installs it with the pinned userspace and no kernel image but the running one's.

The newest metapackage depends on the newest kernel ABI's module, which depends on that kernel's
image (packages.ubuntu.com, linux-modules-nvidia-*; tests/fixtures/aptrepo/specs/
nvidia-templates.yml, ubuntu-lrm): on a host not running the newest ABI, installing it installed
another kernel, which GRUB then boots past the kernel role's one-shot boot. These tests run the
real `apt-get --simulate` in a private apt root and render the role's own expressions
(roles/driver/vars/main.yml) on its output.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from role_check import ROOT
from test_driver_revision import ARCHIVE, _env, _flat_repo

pytestmark = pytest.mark.skipif(shutil.which("apt-get") is None, reason="apt not installed")

RUNNING = "5.15.0-151-generic"
NEWER = "5.15.0-160-generic"
U = "535.288.01-0ubuntu0.22.04.1"
F = "535-server"


def _archive(meta_follows: str, meta_common: str = U) -> list[tuple[str, str, str]]:
    def lrm(k: str, version: str) -> tuple[str, str, str]:
        return (f"linux-modules-nvidia-{F}-{k}", version,
                f"linux-image-{k} | linux-image-unsigned-{k}, nvidia-kernel-common-{F} (>= {U})")  # fmt: skip

    return [
        ("nvidia-headless-no-dkms-535-server", U, f"nvidia-kernel-common-{F} (= {U})"),
        (f"nvidia-kernel-common-{F}", U, ""),
        lrm(RUNNING, "5.15.0-151.161"),
        lrm(NEWER, "5.15.0-160.170"),
        (f"linux-image-{NEWER}", "5.15.0-160.170", ""),
        (f"linux-image-{RUNNING}", "5.15.0-151.161", ""),
        (f"linux-modules-nvidia-{F}-generic", "5.15.0-160.170" if meta_follows == NEWER else "5.15.0-151.161",
         f"linux-modules-nvidia-{F}-{meta_follows}, nvidia-kernel-common-{F} (>= {meta_common})"),
    ]  # fmt: skip


def _root(tmp_path: Path, packages: list[tuple[str, str, str]]) -> Path:
    import getpass

    root, repo = tmp_path / "aptroot", tmp_path / "repos" / ARCHIVE
    _flat_repo(repo, "Ubuntu", packages)
    for d in ("etc/apt/preferences.d", "etc/apt/apt.conf.d", "var/lib/apt/lists/partial",
              "var/cache/apt/archives/partial", "var/lib/dpkg", "var/log/apt"):  # fmt: skip
        (root / d).mkdir(parents=True)
    # the running kernel is installed, as on the host
    (root / "var/lib/dpkg/status").write_text(
        f"Package: linux-image-{RUNNING}\nStatus: install ok installed\nVersion: 5.15.0-151.161\n"
        "Architecture: amd64\nMaintainer: x\nDescription: running kernel\n"
    )
    (root / "etc/apt/sources.list").write_text(f"deb [trusted=yes] file:{repo} ./\n")
    conf = tmp_path / "apt.conf"
    conf.write_text(
        f'Dir "{root}/";\nDir::State::status "{root}/var/lib/dpkg/status";\n'
        f'APT::Sandbox::User "{getpass.getuser()}";\n'
        'APT::Architecture "amd64";\nAPT::Architectures { "amd64"; };\n'
        'Acquire::Languages "none";\nDebug::NoLocking "true";\n'
    )
    subprocess.run(["apt-get", "update", "-q"], env=_env(conf), capture_output=True, check=True)
    return conf


def _simulate(conf: Path) -> dict[str, Any]:
    """The role's simulation (tasks/modules.yml), registered as Ansible registers a command."""
    argv = ["apt-get", "--simulate", "--quiet", "--allow-downgrades", "--allow-change-held-packages",
            "install", f"nvidia-headless-no-dkms-535-server={U}",
            f"linux-modules-nvidia-{F}-{RUNNING}", f"linux-modules-nvidia-{F}-generic"]  # fmt: skip
    r = subprocess.run(argv, env=_env(conf), capture_output=True, text=True, check=False)
    return {"rc": r.returncode, "stdout_lines": r.stdout.splitlines(),
            "stderr_lines": r.stderr.splitlines()}  # fmt: skip


def _render(sim: dict[str, Any]) -> tuple[bool, str]:
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar

    role_vars = yaml.safe_load((ROOT / "roles/driver/vars/main.yml").read_text())
    variables = {
        **role_vars,
        "__gpufix_driver_lrm_meta_sim": sim,
        "gpufix_driver_kernel_release": RUNNING,
    }
    t = Templar(loader=DataLoader(), variables=variables)
    ok = t.template("{{ _gpufix_driver_lrm_meta_ok | bool }}")
    why = t.template("{{ _gpufix_driver_lrm_meta_why }}")
    return ok in (True, "True"), str(why)


def test_a_metapackage_that_follows_the_running_kernel_is_taken(tmp_path: Path) -> None:
    sim = _simulate(_root(tmp_path, _archive(meta_follows=RUNNING)))
    assert sim["rc"] == 0
    assert _render(sim)[0]


def test_a_metapackage_that_would_install_another_kernel_is_left_out(tmp_path: Path) -> None:
    sim = _simulate(_root(tmp_path, _archive(meta_follows=NEWER)))
    assert sim["rc"] == 0  # apt would do it: before, the role did, and GRUB booted NEWER next
    assert any(line.startswith(f"Inst linux-image-{NEWER}") for line in sim["stdout_lines"])
    ok, why = _render(sim)
    assert not ok and why == f"its install would add kernel {NEWER}"


def test_a_metapackage_built_for_another_userspace_is_left_out(tmp_path: Path) -> None:
    sim = _simulate(
        _root(tmp_path, _archive(meta_follows=RUNNING, meta_common="535.300.01-0ubuntu1"))
    )
    assert sim["rc"] != 0  # before, the role installed it, and the whole install failed
    ok, why = _render(sim)
    assert not ok and why.startswith("apt cannot install it with this driver version: ")
    assert "nvidia-kernel-common-535-server" in why, why
