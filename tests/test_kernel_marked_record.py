"""The kernel role's marked-manual record (/var/lib/gpufix/kernel-marked-manual) is data: finalize
marks automatic again only a kernel release's packages it names, never another package a line
of the file names (autoremove would then take it: openssh-server, a metapackage)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from role_check import ROOT, run_playbook

PATTERN = yaml.safe_load((ROOT / "roles/kernel/vars/main.yml").read_text())[
    "_gpufix_kernel_marked_pattern"
]


@pytest.mark.parametrize(
    ("name", "taken"),
    [
        ("linux-image-4.15.0-213-generic", True),
        ("linux-image-unsigned-5.4.0-150-generic", True),
        ("linux-modules-extra-5.4.0-150-generic", True),
        ("linux-modules-nvidia-535-5.4.0-150-generic", True),
        ("linux-modules-nvidia-535-server-open-5.15.0-1040-nvidia", True),
        ("linux-signatures-nvidia-5.15.0-91-generic", True),
        ("linux-image-generic", False),  # a metapackage: no more kernel updates once removed
        ("linux-image-generic-hwe-18.04", False),
        ("linux-modules-nvidia-535-generic-hwe-18.04", False),
        ("linux-headers-5.4.0-150-generic", False),  # state.yml never marks headers
        ("openssh-server", False),
        ("--allow-remove-essential", False),
    ],
)
def test_the_names_finalize_takes_back(name: str, taken: bool) -> None:
    # the names state.yml marks manual, and nothing else (Ansible's `match` is re.match)
    assert bool(re.match(PATTERN, name)) is taken


def test_an_edited_record_marks_no_other_installed_package(tmp_path: Path) -> None:
    record = tmp_path / "kernel-marked-manual"
    record.write_text("bash\ncoreutils\nlinux-image-generic\n-o\nlinux-image-6.1.0-99-amd64\n")
    book = tmp_path / "unmark.yml"
    book.write_text(
        "- hosts: localhost\n"
        "  gather_facts: false\n"
        "  tasks:\n"
        "    - ansible.builtin.package_facts:\n"
        "    - ansible.builtin.include_role:\n"
        "        name: kernel\n"
        "        tasks_from: unmark\n"
        "    - ansible.builtin.debug:\n"
        "        msg: 'UNMARK={{ _gpufix_kernel_unmark | to_json }}'\n"
    )
    r = run_playbook(
        tmp_path,
        book,
        {
            "gpufix_kernel_marked_manual_file": str(record),
            "_gpufix_kernel_running": "6.1.0-99-amd64",
        },
        check=True,  # check mode: apt-mark is not run, the record is not removed
    )
    assert r.returncode == 0, r.stdout[-3000:]
    # bash and coreutils are installed here: the old filter took every installed name
    assert "UNMARK=[]" in r.stdout, r.stdout[-3000:]
    assert record.exists()
