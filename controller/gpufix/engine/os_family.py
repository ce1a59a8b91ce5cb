"""Whether gpufix's roles can change this host's OS.

The roles that install and hold packages (apt, dpkg holds) or edit the boot (update-grub and a
/etc/default/grub.d drop-in) assert a Debian-family host in their preflight, so on any other OS
apply stops there and changes nothing. The plan says so up front; the fix class it names stands.
"""

from __future__ import annotations

from collections.abc import Iterable

from gpufix.engine.kb import KnowledgeBase
from gpufix.engine.plan import Step
from gpufix.facts.host import Host

# Playbooks whose roles refuse a host that is not Debian-family (tests/test_os_family_roles.py
# holds this to the roles' preflight asserts). nccl_profile.yml and single_gpu.yml write files
# any Linux reads (/etc/nccl.conf, a profile.d file) and run anywhere.
DEBIAN_ONLY = frozenset(
    {
        "container_fallback.yml",
        "container_fix.yml",
        "cuda_downgrade.yml",
        "driver_pin.yml",
        "kernel_upgrade.yml",
        "pcie_acs.yml",
    }
)


def release(host: Host, kb: KnowledgeBase) -> str | None:
    """The codename to look up in the Ubuntu/Debian tables: None inside a container (os-release
    is the image's) and on another OS (RHEL's "(Ootpa)" is no archive, whether ID_LIKE says so
    or the ID is neither Ubuntu nor Debian and the tables do not know the codename). An Ubuntu
    or Debian codename the tables lack stays: its packages are then "not listed", not guessed."""
    c = host.codename
    if not c or host.from_container or host.debian_family is False:
        return None
    if kb.ubuntu(c) is None and (host.os_id or "").lower() not in ("ubuntu", "debian"):
        return None
    return c


def risk(host: Host, steps: Iterable[Step]) -> str | None:
    """One line for a plan whose steps run roles this host's OS cannot take; None otherwise."""
    if host.debian_family is not False or host.from_container:
        return None
    books = sorted({s.playbook for s in steps if s.playbook in DEBIAN_ONLY})
    if not books:
        return None
    os_name = " ".join(x for x in (host.os_id, host.version_id) if x)
    like = " ".join(host.os_id_like or ()) or "none"
    return (
        f"{os_name} is not Debian-family (os-release ID_LIKE: {like}): gpufix's roles for "
        f"{', '.join(books)} work through apt, dpkg and update-grub, so apply stops in their "
        "preflight and changes nothing; carry the change out with the OS's own package manager "
        "and boot-loader tools"
    )
