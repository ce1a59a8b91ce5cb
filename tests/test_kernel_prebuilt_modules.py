"""roles/kernel/tasks/prebuilt.yml: where the driver uses Canonical's prebuilt modules for the
running kernel, which linux-modules-nvidia-* packages the role installs for the target kernel.

The decision is plugins/filter/gpufix_kernel.py, a pure function tested here on recorded
`apt-get --simulate` answers (the file is loaded by path: it imports no ansible). Real
ansible-playbook runs in check mode on this machine (connection=local) show that the role asks
apt what it should and finds the filter, from this checkout and from the installed collection;
apt-get is a stand-in on PATH that answers from tmp_path, and the installed packages are given
as facts."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from role_check import ROOT, run_playbook

PLUGIN = ROOT / "plugins" / "filter" / "gpufix_kernel.py"
_spec = importlib.util.spec_from_file_location("gpufix_kernel_filter", PLUGIN)
assert _spec and _spec.loader
lrm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lrm)

RUNNING = "4.15.0-213-generic"
TARGET = "5.4.0-150-generic"
MODULE = f"linux-modules-nvidia-535-{TARGET}"
META = "linux-modules-nvidia-535-generic-hwe-18.04"
INSTALLED = {
    "nvidia-driver-535": "535.183.01-0ubuntu0.18.04.1",
    "nvidia-kernel-common-535": "535.183.01-0ubuntu0.18.04.1",
    f"linux-modules-nvidia-535-{RUNNING}": "4.15.0-213.224",
    "linux-modules-nvidia-535-generic": "4.15.0-213.224",
}
FITS = f"Inst {MODULE} (5.4.0-150.167~18.04.1 localrepo [all])\nConf {MODULE} (5.4.0-150.167~18.04.1)\n"
META_FITS = f"Inst {META} (5.4.0-150.167~18.04.1 localrepo [all])\n"
# apt 1.6's answer for a module built for 535.216.01 on a host with 535.183.01 (tight Depends).
UNMET = (
    "Some packages could not be installed.\nThe following packages have unmet dependencies:\n"
    f" {MODULE} : Depends: nvidia-kernel-common-535 (>= 535.216.01) but"
    " 535.183.01-0ubuntu0.18.04.1 is to be installed\n"
    "E: Unable to correct problems, you have held broken packages.\n"
)
UPGRADES = (
    "Inst nvidia-kernel-common-535 [535.183.01-0ubuntu0.18.04.1] (535.216.01-0ubuntu0.18.04.1 x [all])\n"
    + FITS
)
MISSING = f"E: Unable to locate package {META}\n"

APT_GET = """#!/bin/sh
# stand-in: `apt-get --simulate --quiet install PKG...` answers from $ANSWERS/PKG+PKG.{out,rc}
shift 3
key=$(printf '%s+' "$@")
key=${key%+}
echo "$key" >> "$ANSWERS/asked"
[ -f "$ANSWERS/$key.out" ] || { echo "E: Unable to locate package $1"; exit 100; }
cat "$ANSWERS/$key.out"
exit "$(cat "$ANSWERS/$key.rc")"
"""

FACTS_MODULE = """#!/usr/bin/python3
import json, sys
from ansible.module_utils.basic import AnsibleModule
m = AnsibleModule(argument_spec={"packages": {"type": "dict"}}, supports_check_mode=True)
m.exit_json(changed=False, ansible_facts={"packages": m.params["packages"]})
"""


DRIVER_CHANGE = "^(Inst|Remv) ((lib)?nvidia-|xserver-xorg-video-nvidia-)"
# Written for this test, in apt's format: an answer that removes packages of the installed driver
# and upgrades its core in one go (Remv and Inst lines together; every one is quoted).
SWAPS = (
    "Remv nvidia-driver-535 [535.183.01-0ubuntu0.18.04.1]\n"
    "Remv libnvidia-compute-535 [535.183.01-0ubuntu0.18.04.1]\n"
    "Inst nvidia-kernel-common-535 [535.183.01-0ubuntu0.18.04.1] (535.216.01-0ubuntu0.18.04.1 x [all])\n"
    + FITS
)


def test_the_driver_change_pattern_is_the_roles() -> None:
    import yaml

    role_vars = yaml.safe_load((ROOT / "roles" / "kernel" / "vars" / "main.yml").read_text())
    assert role_vars["_gpufix_kernel_lrm_driver_change"] == DRIVER_CHANGE


def test_the_filter_imports_no_ansible() -> None:
    """Loading the plugin by path here must not pull ansible into the test process (it would
    fix ansible.constants before later tests set theirs)."""
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('f', {str(PLUGIN)!r})\n"
        "spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'ansible'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    assert lrm.FilterModule().filters() == {"gpufix_kernel_lrm_decision": lrm.lrm_decision}


def test_gpufix_runs_ansible_with_the_filter_folder() -> None:
    """The wheel has no collection to name: gpufix points ansible at the folder (as ansible.cfg)."""
    from gpufix.runner import _env

    assert (Path(_env()["ANSIBLE_FILTER_PLUGINS"]) / PLUGIN.name).is_file()


def registered(asked: list[str], out: str, rc: int, flavour: str = "535") -> dict[str, Any]:
    """One loop item of the role's `apt-get --simulate` command as Ansible registers it, with
    the E: lines on stderr, where apt writes them (the stand-in apt-get prints all on stdout)."""
    err = "".join(line + "\n" for line in out.splitlines() if line.startswith("E: "))
    out = "".join(line + "\n" for line in out.splitlines() if not line.startswith("E: "))
    return {
        "__gpufix_kernel_lrm_f": flavour,
        "cmd": ["apt-get", "--simulate", "--quiet", "install", *asked],
        "rc": rc,
        "stdout": out.rstrip("\n"),
        "stdout_lines": out.splitlines(),
        "stderr": err.rstrip("\n"),
        "stderr_lines": err.splitlines(),
        "changed": False,
    }


def skipped(flavour: str = "535") -> dict[str, Any]:
    return {"__gpufix_kernel_lrm_f": flavour, "changed": False, "skipped": True,
            "skip_reason": "Conditional result was False", "false_condition": "..."}  # fmt: skip


def choose(firsts: list[dict[str, Any]], alones: list[dict[str, Any]]) -> dict[str, list[str]]:
    return lrm.lrm_decision(firsts, alones, TARGET, DRIVER_CHANGE)


BOTH = [MODULE, META]
NOT_ASKED = skipped()
UNMET_WHY = (
    f"{MODULE} is built for another driver version: apt cannot install it with the installed"
    f" driver ({MODULE} : Depends: nvidia-kernel-common-535 (>= 535.216.01) but"
    " 535.183.01-0ubuntu0.18.04.1 is to be installed;"
    " E: Unable to correct problems, you have held broken packages.)"
)
UPGRADES_WHY = (
    f"{MODULE} is built for another driver version: apt would change the driver"
    " (Inst nvidia-kernel-common-535 [535.183.01-0ubuntu0.18.04.1] (535.216.01-0ubuntu0.18.04.1 x [all]))"
)
MISSING_WHY = f"{MODULE} is in none of this host's apt sources"


@pytest.mark.parametrize(
    ("firsts", "alones", "expected"),
    [
        pytest.param(
            [registered(BOTH, FITS + META_FITS, 0)], [NOT_ASKED],
            {"install": BOTH, "why": []}, id="module-and-metapackage-fit",
        ),
        pytest.param(
            [registered(BOTH, UNMET, 100)], [registered([MODULE], UNMET, 100)],
            {"install": [], "why": [UNMET_WHY]}, id="built-for-another-driver-version",
        ),
        pytest.param(
            [registered(BOTH, UPGRADES, 0)], [registered([MODULE], UPGRADES, 0)],
            {"install": [], "why": [UPGRADES_WHY]}, id="would-upgrade-the-driver",
        ),
        pytest.param(
            [registered(BOTH, MISSING, 100)], [registered([MODULE], FITS, 0)],
            {"install": [MODULE], "why": []}, id="metapackage-missing-module-alone",
        ),
        pytest.param(
            [registered(BOTH, f"E: Unable to locate package {MODULE}", 100)],
            [registered([MODULE], f"E: Unable to locate package {MODULE}", 100)],
            {"install": [], "why": [MISSING_WHY]}, id="in-none-of-the-sources",
        ),
        pytest.param(
            [registered(BOTH, f"E: Package '{MODULE}' has no installation candidate", 100)],
            [registered([MODULE], f"E: Package '{MODULE}' has no installation candidate", 100)],
            {"install": [], "why": [MISSING_WHY]}, id="no-installation-candidate",
        ),
        pytest.param(
            [registered(BOTH, SWAPS, 0)], [registered([MODULE], SWAPS, 0)],
            {"install": [], "why": [
                f"{MODULE} is built for another driver version: apt would change the driver"
                " (Remv nvidia-driver-535 [535.183.01-0ubuntu0.18.04.1],"
                " Remv libnvidia-compute-535 [535.183.01-0ubuntu0.18.04.1],"
                " Inst nvidia-kernel-common-535 [535.183.01-0ubuntu0.18.04.1] (535.216.01-0ubuntu0.18.04.1 x [all]))"
            ]},
            id="removes-and-installs-driver-packages",
        ),
        pytest.param(
            # the metapackage drags a newer libnvidia along; the module by itself leaves it be
            [registered(BOTH, "Inst libnvidia-compute-535 [535.183.01-0ubuntu0.18.04.1] (535.216.01-0ubuntu0.18.04.1 x [amd64])\n" + FITS + META_FITS, 0)],
            [registered([MODULE], FITS, 0)],
            {"install": [MODULE], "why": []}, id="metapackage-moves-libnvidia-module-alone-fits",
        ),
        pytest.param(
            # the target's module is installed already: only the metapackage was asked, and
            # it would move the driver; nothing is installed and there is no module to refuse
            [registered([META], "Inst nvidia-kernel-common-535 [535.183.01-0ubuntu0.18.04.1] (535.216.01-0ubuntu0.18.04.1 x [all])\n" + META_FITS, 0)],
            [NOT_ASKED],
            {"install": [], "why": []}, id="module-installed-metapackage-refused",
        ),
        pytest.param(
            # nothing left to ask for one flavour; two flavours decided each on its own answer
            [skipped("535-server"), registered(BOTH, FITS + META_FITS, 0),
             registered(["linux-modules-nvidia-470-" + TARGET], UNMET.replace("535", "470"), 100, "470")],
            [skipped("535-server"), NOT_ASKED, skipped("470")],
            {"install": BOTH, "why": [
                UNMET_WHY.replace("535", "470"),
            ]}, id="flavours-each-on-its-own",
        ),
        pytest.param(
            # Inst and Conf lines of the modules themselves, and of other packages, are no
            # driver change
            [registered(BOTH, FITS + META_FITS + "Inst linux-modules-extra-5.4.0-150-generic (5.4.0-150.167~18.04.1 x [amd64])\n", 0)],
            [NOT_ASKED],
            {"install": BOTH, "why": []}, id="module-lines-are-not-driver-changes",
        ),
    ],
)  # fmt: skip
def test_the_decision_on_recorded_apt_answers(
    firsts: list[dict[str, Any]], alones: list[dict[str, Any]], expected: dict[str, list[str]]
) -> None:
    assert choose(firsts, alones) == expected


def test_decide_returns_a_plain_verdict_per_flavour() -> None:
    assert lrm.decide(MODULE, BOTH, {"rc": 0, "stdout": FITS + META_FITS}, None, DRIVER_CHANGE) == {
        "install": True, "packages": BOTH, "why": "",
    }  # fmt: skip
    refused = lrm.decide(MODULE, BOTH, {"rc": 0, "stdout": UPGRADES}, None, DRIVER_CHANGE)
    assert refused == {"install": False, "packages": [], "why": UPGRADES_WHY}
    # an answer with no rc (never run) does not fit
    assert lrm.decide(MODULE, BOTH, {"stdout": FITS}, None, DRIVER_CHANGE)["install"] is False


def test_an_unmet_answer_quotes_at_most_two_of_apts_lines_on_one_line() -> None:
    said = (
        f" {MODULE} : Depends: nvidia-kernel-common-535 (>= 535.216.01)   but it is not going to be installed\n"
        f"                     Depends: nvidia-dkms-535 but it is not going to be installed\n"
        f" {META} : Depends: {MODULE} but it is not going to be installed\n"
    )
    why = lrm.refusal(MODULE, 100, said, "E: Unable to correct problems", DRIVER_CHANGE)
    assert why == (
        f"{MODULE} is built for another driver version: apt cannot install it with the installed"
        f" driver ({MODULE} : Depends: nvidia-kernel-common-535 (>= 535.216.01) but it is not going"
        f" to be installed; {META} : Depends: {MODULE} but it is not going to be installed)"
    )


@pytest.fixture(scope="module")
def collection(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """This checkout built and installed as the gpufix.fleet collection (as test_packaging)."""
    build = tmp_path_factory.mktemp("build")
    subprocess.run(
        ["ansible-galaxy", "collection", "build", str(ROOT), "--output-path", str(build)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    (tarball,) = build.glob("gpufix-fleet-*.tar.gz")
    dest = tmp_path_factory.mktemp("collections")
    subprocess.run(
        ["ansible-galaxy", "collection", "install", str(tarball), "-p", str(dest)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    yield dest


def run_role(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    answers: dict[str, tuple[str, int]],
    extra: dict[str, Any] | None = None,
    role: str = "kernel",
    env: dict[str, str] | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """The role's prebuilt.yml through ansible-playbook: its decision and what it asked apt."""
    stub = tmp_path / "bin"
    stub.mkdir()
    (stub / "apt-get").write_text(APT_GET)
    (stub / "apt-get").chmod(0o755)
    lib = tmp_path / "library"
    lib.mkdir()
    (lib / "gpufix_test_facts.py").write_text(FACTS_MODULE)
    ans = tmp_path / "answers"
    ans.mkdir()
    for key, (out, rc) in answers.items():
        (ans / f"{key}.out").write_text(out)
        (ans / f"{key}.rc").write_text(str(rc))
    monkeypatch.setenv("PATH", f"{stub}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("ANSWERS", str(ans))
    monkeypatch.setenv("ANSIBLE_LIBRARY", str(lib))
    packages = {n: [{"name": n, "version": v}] for n, v in INSTALLED.items()}
    result = tmp_path / "decision.json"
    book = tmp_path / "book.yml"
    book.write_text(
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n"
        "    - gpufix_test_facts:\n"
        f"        packages: {json.dumps(packages)}\n"
        "    - block:\n"
        f"        - ansible.builtin.include_role: {{name: {role}, tasks_from: prebuilt}}\n"
        "          vars:\n"
        f"            _gpufix_kernel_running: {RUNNING}\n"
        f"            _gpufix_kernel_target: {TARGET}\n"
        "            _gpufix_kernel_image_metapackage: linux-image-generic-hwe-18.04\n"
        # this machine's apt has no such package: the install task (last) fails after the decision
        "      rescue:\n"
        "        - ansible.builtin.assert:\n"
        "            that: ansible_failed_task.name is search('Install Canonical')\n"
        "    - ansible.builtin.copy:\n"
        '        content: \'{{ {"install": _gpufix_kernel_lrm_install, "why": _gpufix_kernel_lrm_why} | to_json }}\'\n'
        f"        dest: {result}\n"
        "        mode: '0644'\n"
        "      check_mode: false\n"
    )
    out = run_playbook(tmp_path, book, extra or {}, check=True, env=env)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    asked = (ans / "asked").read_text().split() if (ans / "asked").exists() else []
    decision: dict[str, Any] = json.loads(result.read_text())
    return decision, asked


def test_module_and_metapackage_that_leave_the_driver_alone_are_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found, asked = run_role(tmp_path, monkeypatch, {f"{MODULE}+{META}": (FITS + META_FITS, 0)})
    assert found == {"install": [MODULE, META], "why": []}
    assert asked == [f"{MODULE}+{META}"]


def test_the_installed_collections_role_finds_the_filter_by_its_full_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, collection: Path
) -> None:
    """No checkout settings: plain ansible-playbook, the role by its FQCN (docs/awx.md, B)."""
    empty = tmp_path / "ansible.cfg"
    empty.write_text("[defaults]\n")
    env = {"ANSIBLE_CONFIG": str(empty), "ANSIBLE_COLLECTIONS_PATH": str(collection)}
    found, asked = run_role(
        tmp_path, monkeypatch, {f"{MODULE}+{META}": (FITS + META_FITS, 0)},
        role="gpufix.fleet.kernel", env=env,
    )  # fmt: skip
    assert found == {"install": [MODULE, META], "why": []}
    assert asked == [f"{MODULE}+{META}"]


def test_a_module_built_for_another_driver_version_is_refused_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found, asked = run_role(
        tmp_path, monkeypatch, {f"{MODULE}+{META}": (UNMET, 100), MODULE: (UNMET, 100)}
    )
    assert found == {"install": [], "why": [UNMET_WHY]}
    assert asked == [f"{MODULE}+{META}", MODULE]


def test_the_module_alone_when_the_metapackage_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found, asked = run_role(
        tmp_path, monkeypatch, {f"{MODULE}+{META}": (MISSING, 100), MODULE: (FITS, 0)}
    )
    assert found == {"install": [MODULE], "why": []}
    assert asked == [f"{MODULE}+{META}", MODULE]


def test_nothing_is_asked_when_turned_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    found, asked = run_role(tmp_path, monkeypatch, {}, {"gpufix_kernel_prebuilt_modules": False})
    assert found == {"install": [], "why": []}
    assert asked == []


def test_the_refusal_says_canonicals_module_is_for_another_driver_version(tmp_path: Path) -> None:
    module = {
        "ok": False,
        "problem": f"no NVIDIA kernel module for it (modinfo -k {TARGET} nvidia finds none)",
        "driver": "535.183.01",
        "dkms": [],
        "secure_boot": False,
    }
    why = f"{MODULE} is built for another driver version: apt cannot install it with the installed driver (...)"
    book = tmp_path / "book.yml"
    book.write_text(
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n"
        "    - ansible.builtin.include_role: {name: kernel, tasks_from: decide}\n"
    )
    vars_ = {
        "_gpufix_kernel_target": TARGET,
        "_gpufix_kernel_running": RUNNING,
        "gpufix_kernel_reboot_allowed": True,
        "gpufix_kernel_nvidia_module": module,
        "_gpufix_kernel_lrm_why": [why],
    }
    out = run_playbook(tmp_path, book, vars_, check=True)
    assert out.returncode != 0
    text = " ".join(out.stdout.split())
    assert (
        f"finds none). Canonical's prebuilt module: {why}. Install linux-modules-nvidia-BRANCH-{TARGET}"
        in text
    ), text[-2000:]


def test_apts_words_are_data_through_the_filter_and_the_fact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hostile host (or apt source) puts Jinja in apt's answer: the filter quotes it into the
    refusal, set_fact keeps it, the play templates the fact, and the payload never runs."""
    mark = tmp_path / "ran"
    payload = "{{ lookup('pipe', 'touch " + str(mark) + "') }}"
    hostile = UNMET.replace("(>= 535.216.01)", f"(>= 535.216.01) {payload}")
    found, _ = run_role(
        tmp_path, monkeypatch, {f"{MODULE}+{META}": (hostile, 100), MODULE: (hostile, 100)}
    )
    assert found["install"] == [] and payload in found["why"][0]
    assert not mark.exists()
