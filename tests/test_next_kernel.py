"""roles/kernel/tasks/next_kernel.yml (and playbooks/reboot.yml's use of it): which kernel GRUB
boots at the next reboot, by GRUB's rules, with recorded grubenv, grub.cfg and /boot contents.
Real ansible-playbook runs on this machine (connection=local), reading files in tmp_path only."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from role_check import ROOT, run_playbook

IMAGES = ("4.15.0-213-generic", "5.4.0-99-generic", "5.4.0-150-generic")
# grub-mkconfig's 00_header: the next_entry branch, then the default the config was made with.
HEADER = (
    'if [ "${{next_entry}}" ] ; then\n   set default="${{next_entry}}"\n   set next_entry=\n'
    '   save_env next_entry\nelse\n   set default="{default}"\nfi\n'
)
OLD = "Advanced options for Ubuntu>Ubuntu, with Linux 4.15.0-213-generic"


def host(tmp_path: Path, grubenv: str | None, default: str | None) -> dict[str, str]:
    boot = tmp_path / "boot"
    boot.mkdir()
    for release in IMAGES:
        (boot / f"vmlinuz-{release}").write_text("")
    (boot / "vmlinuz-5.4.0-150-generic.old").write_text("")
    env = tmp_path / "grubenv"
    if grubenv is not None:
        env.write_text(grubenv)
    cfg = tmp_path / "grub.cfg"
    if default is not None:
        cfg.write_text("### BEGIN /etc/grub.d/00_header ###\n" + HEADER.format(default=default))
    return {
        "gpufix_kernel_grub_editenv_command": f"cat {env}",
        "gpufix_kernel_grub_cfg": str(cfg),
        "gpufix_kernel_boot_dir": str(boot),
    }


def run(tmp_path: Path, play: str, vars_: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    book = tmp_path / "book.yml"
    book.write_text(play)
    return run_playbook(tmp_path, book, vars_, check=False)


def next_kernel(tmp_path: Path, vars_: dict[str, str]) -> dict[str, str]:
    result = tmp_path / "next.json"
    play = (
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n"
        "    - ansible.builtin.include_role: {name: kernel, tasks_from: next_kernel}\n"
        "    - ansible.builtin.copy:\n"
        "        content: '{{ gpufix_kernel_next | to_json }}'\n"
        f"        dest: {result}\n"
        "        mode: '0644'\n"
    )
    out = run(tmp_path, play, vars_)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    found: dict[str, str] = json.loads(result.read_text())
    return found


@pytest.mark.parametrize(
    ("grubenv", "default", "kernel", "why"),
    [
        # No grubenv, no grub.cfg: entry 0, the newest image by version sort (99 < 150).
        (None, None, "5.4.0-150-generic", "first entry"),
        ("", "0", "5.4.0-150-generic", "first entry"),
        # An administrator's GRUB_DEFAULT=saved keeping an old kernel: that one boots, not the newest.
        (f"saved_entry={OLD}\n", "${saved_entry}", "4.15.0-213-generic", "saved_entry"),
        # Saved mode with nothing saved yet: GRUB falls back to entry 0.
        ("", "${saved_entry}", "5.4.0-150-generic", "first entry"),
        # A saved entry that the config was not made to use is ignored.
        (f"saved_entry={OLD}\n", "0", "5.4.0-150-generic", "first entry"),
        # The one-shot wins over everything; an entry id names its kernel too.
        (
            f"saved_entry={OLD}\nnext_entry=gnulinux-advanced-1234>"
            "gnulinux-5.4.0-99-generic-advanced-1234\n",
            "${saved_entry}",
            "5.4.0-99-generic",
            "one-shot",
        ),
        # GRUB_DEFAULT set to a title.
        ("", OLD, "4.15.0-213-generic", "GRUB_DEFAULT"),
    ],
)
def test_the_kernel_grub_boots_next(
    tmp_path: Path, grubenv: str | None, default: str | None, kernel: str, why: str
) -> None:
    found = next_kernel(tmp_path, host(tmp_path, grubenv, default))
    assert found["kernel"] == kernel
    assert found["why"].startswith(why)
    assert found["problem"] == ""


def test_a_submenu_index_is_not_guessed(tmp_path: Path) -> None:
    found = next_kernel(tmp_path, host(tmp_path, "", "1>2"))
    assert found["kernel"] == ""
    assert "GRUB boots entry 1>2" in found["problem"]
    # what the driver role builds DKMS for besides, as the entry names no kernel
    assert found["newest"] == "5.4.0-150-generic"


def test_reboot_playbook_refuses_a_next_kernel_it_cannot_tell(tmp_path: Path) -> None:
    vars_ = host(tmp_path, "", "1>2")
    play = f"- ansible.builtin.import_playbook: {ROOT / 'playbooks' / 'reboot.yml'}\n"
    out = run(tmp_path, play, {**vars_, "ansible_become": False})
    assert out.returncode != 0
    assert "not rebooting: GRUB boots entry 1>2" in out.stdout
    # Nothing after the refusal ran: no module check, no reboot.
    assert "check_module" not in out.stdout and "Reboot (the kernel role" not in out.stdout


def test_grub_text_is_never_templated(tmp_path: Path) -> None:
    # A host's grubenv and grub.cfg are data: a Jinja lookup in them must not run here.
    marker = tmp_path / "templated"
    payload = "{{ lookup('ansible.builtin.pipe', 'touch " + str(marker) + "') }}"
    vars_ = host(tmp_path, f"next_entry=Ubuntu, with Linux {payload}\n", payload)
    found = next_kernel(tmp_path, vars_)
    assert found["kernel"] == ""
    assert "{" not in found["problem"] and not marker.exists()
    # And through reboot.yml's refusal message.
    play = f"- ansible.builtin.import_playbook: {ROOT / 'playbooks' / 'reboot.yml'}\n"
    out = run(tmp_path, play, {**vars_, "ansible_become": False})
    assert out.returncode != 0 and "not rebooting: GRUB boots entry" in out.stdout
    assert not marker.exists()


UUID = "0a1b2c3d-4e5f-6789-abcd-ef0123456789"
GA, HWE = "4.15.0-213-generic", "5.4.0-150-generic"


def _entry(kernel: str, indent: str = "\t") -> str:
    return (
        f"{indent}menuentry 'Ubuntu, with Linux {kernel}' --class ubuntu --class gnu-linux "
        f"--class gnu --class os $menuentry_id_option 'gnulinux-{kernel}-advanced-{UUID}' {{\n"
        f"{indent}}}\n"
    )


# 10_linux's menu as Ubuntu writes it: a first entry, then the submenu of every kernel
SUBMENU = (
    HEADER.format(default="${saved_entry}")
    + f"menuentry 'Ubuntu' --class ubuntu $menuentry_id_option 'gnulinux-simple-{UUID}' {{\n}}\n"
    + f"submenu 'Advanced options for Ubuntu' $menuentry_id_option 'gnulinux-advanced-{UUID}' {{\n"
    + _entry(HWE)
    + _entry(GA)
    + "}\n"
)
FLAT = HEADER.format(default="${saved_entry}") + _entry(HWE, "") + _entry(GA, "")  # no submenu


@pytest.mark.parametrize(
    ("cfg", "grubenv", "kernel", "why"),
    [
        (SUBMENU, f"saved_entry={OLD}\n", GA, "saved_entry"),
        (
            SUBMENU,
            f"saved_entry=gnulinux-advanced-{UUID}>gnulinux-{GA}-advanced-{UUID}\n",
            GA,
            "saved",
        ),
        (SUBMENU, f"next_entry={OLD}\n", GA, "one-shot"),
        (FLAT, f"saved_entry=Ubuntu, with Linux {GA}\n", GA, "saved_entry"),
        # GRUB_DISABLE_SUBMENU=y: the path is in no menu, GRUB boots its first entry
        (FLAT, f"saved_entry={OLD}\n", HWE, "first entry"),
        (FLAT, f"next_entry={OLD}\n", HWE, "first entry"),
        # the saved kernel was removed since
        (SUBMENU.replace(_entry(GA), ""), f"saved_entry={OLD}\n", HWE, "first entry"),
    ],
)
def test_an_entry_the_menu_does_not_hold_boots_the_first(
    tmp_path: Path, cfg: str, grubenv: str, kernel: str, why: str
) -> None:
    """A review (2026-12-05): a saved or one-shot entry was trusted without the menu, and the
    module check before a reboot (pcie_acs, playbooks/reboot.yml) looked at a kernel GRUB would
    not boot: GRUB boots an entry its menu does not hold as its first one, the newest kernel."""
    vars_ = host(tmp_path, grubenv, None)
    Path(vars_["gpufix_kernel_grub_cfg"]).write_text(cfg)
    found = next_kernel(tmp_path, vars_)
    assert found["kernel"] == kernel and found["why"].startswith(why), found
    assert found["problem"] == ""
