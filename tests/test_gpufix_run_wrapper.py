"""The gpufix-run wrapper (roles/container_runtime/templates/gpufix-run.j2), rendered by Ansible's
template module from the role's defaults and run against a stand-in docker that records its
arguments and the NCCL profile the container would see.

A review (2026-12-06): on Docker's bridge network the host's interface names do not exist, so a
mounted profile with NCCL_SOCKET_IFNAME=ens5 made NCCL's bootstrap find no interface."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from role_check import run_playbook

ROOT = Path(__file__).resolve().parents[1]
ROLE = ROOT / "roles" / "container_runtime"
IMAGE = "nvcr.io/nvidia/pytorch:24.04-py3@sha256:" + "a" * 64
STUB = """#!/bin/sh
# stand-in docker: the arguments, one per line, then the mounted profile as the container sees it
printf '%s\\n' "$@" >"$RECORD"
for a in "$@"; do
  case "$a" in *:/etc/nccl.conf:ro) cp "${a%%:/etc/nccl.conf:ro}" "$RECORD.conf" ;; esac
done
"""


def _render(tmp: Path, multi_node: bool, conf: Path) -> Path:
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    ev = {
        **defaults,
        "gpufix_container_runtime_image": IMAGE,
        "gpufix_container_runtime_multi_node": multi_node,
        "gpufix_container_runtime_nccl_conf": str(conf),
    }
    out = tmp / "gpufix-run"
    book = tmp / "render.yml"
    book.write_text(
        yaml.safe_dump(
            [
                {
                    "hosts": "localhost",
                    "gather_facts": False,
                    "tasks": [
                        {
                            "ansible.builtin.template": {
                                "src": str(ROLE / "templates" / "gpufix-run.j2"),
                                "dest": str(out),
                                "mode": "0755",
                            }
                        }
                    ],
                }
            ]
        )
    )
    res = run_playbook(tmp, book, ev, check=False)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    return out


def _run(tmp: Path, wrapper: Path) -> tuple[list[str], str | None]:
    stub_dir = tmp / "bin"
    stub_dir.mkdir(exist_ok=True)
    (stub_dir / "docker").write_text(STUB)
    (stub_dir / "docker").chmod(0o755)
    record = tmp / "argv"
    work = tmp / "tmp"
    work.mkdir(exist_ok=True)
    env = {**os.environ, "PATH": f"{stub_dir}:{os.environ['PATH']}", "RECORD": str(record),
           "TMPDIR": str(work)}  # fmt: skip
    subprocess.run(
        [str(wrapper), "true"], check=True, env=env, timeout=60, stdin=subprocess.DEVNULL
    )
    conf = Path(f"{record}.conf")
    assert list(work.iterdir()) == []  # the profile's copy is gone once docker returned
    return record.read_text().splitlines(), conf.read_text() if conf.exists() else None


@pytest.fixture
def profile(tmp_path: Path) -> Path:
    p = tmp_path / "nccl.conf"
    p.write_text("# gpufix nccl_profile\nNCCL_SOCKET_IFNAME==ens5\nNCCL_IB_DISABLE=1\n")
    return p


@pytest.mark.skipif(shutil.which("sh") is None, reason="needs sh")
def test_on_the_bridge_network_the_container_gets_the_profile_without_the_interface(
    tmp_path: Path, profile: Path
) -> None:
    argv, seen = _run(tmp_path, _render(tmp_path, multi_node=False, conf=profile))
    assert "--network" not in argv
    assert seen is not None and "NCCL_IB_DISABLE=1" in seen and "NCCL_SOCKET_IFNAME" not in seen
    assert argv[argv.index(IMAGE) :] == [IMAGE, "true"]


def test_on_the_host_network_the_profile_is_mounted_as_it_is(tmp_path: Path, profile: Path) -> None:
    argv, seen = _run(tmp_path, _render(tmp_path, multi_node=True, conf=profile))
    assert argv[argv.index("--network") + 1] == "host"
    assert f"{profile}:/etc/nccl.conf:ro" in argv
    assert seen == profile.read_text()


def test_without_a_profile_nothing_is_mounted(tmp_path: Path) -> None:
    argv, seen = _run(tmp_path, _render(tmp_path, multi_node=False, conf=tmp_path / "none"))
    assert seen is None and not [a for a in argv if a.endswith("/etc/nccl.conf:ro")]
