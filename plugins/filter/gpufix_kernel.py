"""The kernel role's choice of Canonical's prebuilt NVIDIA modules for the target kernel
(roles/kernel/tasks/prebuilt.yml), read from `apt-get --simulate install` answers.

Pure Python with no ansible import: tests/test_kernel_prebuilt_modules.py loads this file by
path. Found as `gpufix_kernel_lrm_decision` from a checkout or the wheel (ansible.cfg's
filter_plugins) and as `gpufix.fleet.gpufix_kernel_lrm_decision` in the installed collection.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

DOCUMENTATION = """
name: gpufix_kernel_lrm_decision
short_description: which of Canonical's prebuilt NVIDIA modules the kernel role installs
description:
  - Reads the registered results of the kernel role's two C(apt-get --simulate install) loops
    (module and flavour metapackage together, then the module alone) and returns the packages to
    install and, for each module left out, why.
positional: alone, target, driver_change
options:
  _input:
    description: The first loop's registered results (C(results) of the register).
    type: list
    elements: dict
    required: true
  alone:
    description: The second loop's registered results, index for index.
    type: list
    elements: dict
    required: true
  target:
    description: The target kernel release, such as C(5.4.0-150-generic).
    type: str
    required: true
  driver_change:
    description: A regular expression matched at the start of each line of apt's answer; a match
      is a line that installs, upgrades, downgrades or removes a package of the NVIDIA driver.
    type: str
    required: true
"""

RETURN = """
_value:
  description: C(install), the packages to install; C(why), one sentence per module refused.
  type: dict
"""

_NOT_IN_SOURCES = re.compile(r"Unable to locate package|has no installation candidate")
_UNMET_DEPENDS = re.compile(r"(?m)^ *\S+ : Depends: .*$")
_APT_ERROR = re.compile(r"(?m)^E: .*$")


def driver_changes(stdout: str, driver_change: str) -> list[str]:
    """The lines of an apt simulation that would move a package of the driver."""
    pattern = re.compile(driver_change)
    return [line for line in stdout.splitlines() if pattern.match(line)]


def fits(rc: int | None, stdout: str, driver_change: str) -> bool:
    """apt can install what was asked and leaves every package of the driver where it is."""
    return rc == 0 and not driver_changes(stdout, driver_change)


def refusal(module: str, rc: int | None, stdout: str, stderr: str, driver_change: str) -> str:
    """Why `module` is not installed, from the apt answer that refused it."""
    said = f"{stdout}\n{stderr}"
    if _NOT_IN_SOURCES.search(said):
        why = f"{module} is in none of this host's apt sources"
    elif rc != 0:
        apt = [m.strip() for m in _UNMET_DEPENDS.findall(said)] + _APT_ERROR.findall(said)
        why = (
            f"{module} is built for another driver version: apt cannot install it with the"
            f" installed driver ({'; '.join(apt[:2])})"
        )
    else:
        moves = ", ".join(driver_changes(stdout, driver_change))
        why = f"{module} is built for another driver version: apt would change the driver ({moves})"
    # one line in the module check's refusal, whatever apt's layout
    return re.sub(r"\s+", " ", why).strip()


def decide(
    module: str,
    asked: Sequence[str],
    first: Mapping[str, Any],
    alone: Mapping[str, Any] | None,
    driver_change: str,
) -> dict[str, Any]:
    """One flavour's decision.

    `asked`: the packages of the first simulation (the target's module unless installed, the
    flavour metapackage); `first` and `alone`: apt's answers as {"rc", "stdout", "stderr"}
    (`alone`, the module by itself, None when not asked). Returns {"install": bool,
    "packages": what to install, "why": why the module is refused, or ""}.
    """

    def answer(r: Mapping[str, Any]) -> tuple[int | None, str, str]:
        return r.get("rc", 1), r.get("stdout") or "", r.get("stderr") or ""

    rc, out, err = answer(first)
    if fits(rc, out, driver_change):
        return {"install": True, "packages": list(asked), "why": ""}
    if alone is not None and fits(*answer(alone)[:2], driver_change):
        return {"install": True, "packages": [module], "why": ""}
    if module not in asked:
        # the module is installed already; the metapackage alone does not fit: nothing to say
        return {"install": False, "packages": [], "why": ""}
    said = answer(alone) if alone is not None else (rc, out, err)
    return {"install": False, "packages": [], "why": refusal(module, *said, driver_change)}


def lrm_decision(
    firsts: Sequence[Mapping[str, Any]],
    alones: Sequence[Mapping[str, Any]],
    target: str,
    driver_change: str,
) -> dict[str, list[str]]:
    """The role's decision over every flavour, from the registered loop results: the first
    simulation per flavour (module and metapackage) and the second (the module alone), index
    for index; skipped entries (no `rc`) were not asked."""
    install: list[str] = []
    why: list[str] = []
    for i, first in enumerate(firsts):
        if "rc" not in first:
            continue
        module = f"linux-modules-nvidia-{first['__gpufix_kernel_lrm_f']}-{target}"
        second = alones[i] if i < len(alones) else {}
        one = decide(
            module,
            list(first["cmd"][4:]),
            first,
            second if "rc" in second else None,
            driver_change,
        )
        install.extend(one["packages"])
        if one["why"]:
            why.append(one["why"])
    return {"install": install, "why": why}


class FilterModule:
    """Ansible's entry point."""

    def filters(self) -> dict[str, Any]:
        return {"gpufix_kernel_lrm_decision": lrm_decision}
