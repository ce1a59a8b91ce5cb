"""Which torch/CUDA/transformers/accelerate stack to move to, up or down.

Up: a newer torch (and the NCCL its wheel pins, torch_nccl.yaml), at least the release with a
documented fix when one is known. Down: the newest torch below the installed one. Neither: the
newest that fits. Every choice fits what the facts know (glibc, Python, driver, GPU
architectures); a fact they do not know is an assumption the plan states, never a guess at "old".

A release whose NCCL has a documented problem on this host's setup (nccl_issues.yaml `setup`,
such as a hang on multi-node InfiniBand) is passed over when an older one that moves the same
way fits; when none does, the choice names the issue so the plan carries its workaround.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from packaging.version import Version

from gpufix import versions
from gpufix.engine.kb import KnowledgeBase, LibRelease, TorchRelease, UbuntuRelease
from gpufix.engine.kb_evidence import NcclIssue
from gpufix.engine.stack import arch_problem, driver_runs_cuda
from gpufix.facts.host import Host


@dataclass(frozen=True)
class Want:
    direction: str | None = None  # up | down | None (the newest that fits)
    nccl_min: str | None = None  # the wheel's NCCL must be at least this (a fixed issue)
    # Choose even when glibc or Python is not in the facts (stating the assumption): only when
    # the evidence itself asks for a stack change.
    assume: bool = False
    # The host's setup in NcclIssue.setup's words (engine/setup.py): issues of other setups never
    # count against a release. `unread`: setups the facts cannot rule out (IB when the network
    # was not read); a release with an issue there is passed over too, and the risk is named.
    setup: frozenset[str] = frozenset()
    unread: frozenset[str] = frozenset()
    # The installed build does not run here (a GPU architecture it dropped, a CUDA the driver
    # cannot run): the smallest move is the same release in a build that does.
    same_release: bool = False
    # The user's release (--torch): only it is considered, and only where it fits and, when a
    # fixed NCCL is asked for, carries the fix.
    release: str | None = None


def setup_issues(
    kb: KnowledgeBase, torch: str, where: frozenset[str], cuda: str | None = None
) -> list[NcclIssue]:
    """Documented problems of the NCCL this torch build pins (the PyPI wheel's when `cuda` is
    not given), on hosts set up like this one; issues that need no particular setup are the
    decision table's business, not this."""
    row = kb.torch_nccl_version(torch, cuda)
    if row is None:
        return []
    return [
        i
        for i in kb.nccl_issues
        if i.setup and set(i.setup) <= where and i.matches(row.nccl) is True
    ]


@dataclass(frozen=True)
class Basis:
    """What the choice may rely on, and what it had to assume."""

    glibc: str | None  # None: not known, not checked (the role's pip finds no wheel if too old)
    pythons: tuple[str, ...]  # "3.10", ...; empty: not known
    current: str | None  # the installed torch
    assumed: list[str] = field(default_factory=list)
    glibc_assumed: bool = False  # the release's glibc, not one read
    pythons_assumed: bool = False  # the release's interpreters, none read


def _release(h: Host, kb: KnowledgeBase) -> UbuntuRelease | None:
    """The Ubuntu or Debian release of the facts' os-release, by codename (a derivative's
    UBUNTU_CODENAME counts) or, for Ubuntu and Debian themselves, by VERSION_ID."""
    row = kb.ubuntu(h.codename) if h.codename and h.debian_family is not False else None
    osid = (h.os_id or "").lower()
    if row is None and h.version_id and osid in ("ubuntu", "debian"):
        row = kb.ubuntu_by_version(h.version_id)
        row = row if row is not None and row.distro == osid else None
    return row


def basis(h: Host, kb: KnowledgeBase) -> Basis:
    current = h.env.torch if h.env else None
    assumed: list[str] = []
    glibc, shipped = h.glibc, _release(h, kb)
    if glibc is None and shipped is not None:
        # the userland the facts were read in ships one glibc per release (ubuntu.yaml)
        glibc = shipped.glibc
        assumed.append(
            f"glibc is not in the facts: {glibc}, the one {shipped.distro} {shipped.version_id} "
            "ships, is assumed"
        )
    elif glibc is None:
        assumed.append("glibc is not in the facts: the wheel's glibc floor is not checked")
    found = [versions.major_minor(p) for p in (*h.pythons, h.env.version if h.env else None)]
    pythons = tuple(f"{p[0]}.{p[1]}" for p in sorted({p for p in found if p}, reverse=True))
    found_any = bool(pythons)
    if not pythons and shipped is not None and shipped.pythons_available:
        # the interpreters the release's archive carries (ubuntu.yaml)
        pythons = tuple(sorted(shipped.pythons_available, key=versions.key, reverse=True))
        assumed.append(
            f"the training Python is not in the facts: one that {shipped.distro} "
            f"{shipped.version_id} packages ({', '.join(pythons)}) is assumed"
        )
    elif not pythons:
        assumed.append("the training Python is not in the facts: the role's interpreter must fit")
    if h.driver is None:
        assumed.append("the driver is not in the facts: the CUDA variant is not checked against it")
    return Basis(
        glibc,
        pythons,
        current,
        assumed,
        glibc_assumed=h.glibc is None and glibc is not None,
        pythons_assumed=bool(pythons) and not found_any,
    )


def _in_range(py: str, lo: str | None, hi: str | None) -> bool:
    v = versions.major_minor(py)
    if v is None:
        return False
    if lo and v < (versions.major_minor(lo) or (0, 0)):
        return False
    return not (hi and v > (versions.major_minor(hi) or (99, 0)))


def _newest_lib(rows: tuple[LibRelease, ...], py: str | None, torch: str) -> LibRelease | None:
    ok = [
        r
        for r in rows
        if (py is None or _in_range(py, r.python_min, r.python_max))
        and (not r.torch_min or versions.at_least(torch, r.torch_min))
    ]
    return max(ok, key=lambda r: versions.key(r.version), default=None)


def lib_choice(
    name: str, rows: tuple[LibRelease, ...], py: str | None, torch: str, installed: str | None
) -> tuple[str | None, str | None]:
    """(version, risk line or None): the newest release that fits, but never a silent move of
    the training code's library backwards or across a major version (transformers 5 breaks 4
    code and the reverse): within the installed major line, at or above the installed version;
    an installed release the table does not know yet is kept, and said so."""
    newest = _newest_lib(rows, py, torch)
    have = versions.parse(installed) if installed else None
    if installed is None or have is None:
        return (newest.version if newest else None), None
    major = have.major
    line = [r for r in rows if versions.key(r.version).major == major]
    fits = _newest_lib(tuple(line), py, torch)
    if fits is not None and versions.key(fits.version) >= have:
        return fits.version, None
    known = line or list(rows)  # the installed line, else the table's newest of any line
    if max((versions.key(r.version) for r in known), default=have) < have:
        return installed, (
            f"{name} {installed} is newer than gpufix's release table knows: kept at {installed}; "
            f"its Python and torch floors are not checked (torch {torch})"
        )
    if fits is not None:
        return fits.version, (
            f"{name} moves down from {installed} to {fits.version}, the newest {major}.x release "
            f"that supports torch {torch}: code written for {installed} may need changes"
        )
    got = newest.version if newest else None
    return got, (
        f"no {name} {major}.x release supports torch {torch}: "
        + (f"{got} instead of {installed}, another major version" if got else "none fits")
    )


def _moves(t: TorchRelease, b: Basis, want: Want) -> bool:
    """The release goes the way asked (the NCCL fix, when one is named, is per build: _has_nccl)."""
    if b.current and want.direction in ("up", "down"):
        here, there = versions.key(b.current.split("+")[0]), versions.key(t.version)
        if (want.direction == "up" and there <= here) or (
            want.direction == "down" and there >= here
        ):
            return False
    return True


def _nccl_moves(
    kb: KnowledgeBase, torch: str, cuda: str, here: str | None, way: str | None
) -> bool:
    """With the installed torch unread, the NCCL the job loads (its wheel, or the probe's
    reading) says which way a build moves; a build whose NCCL the table does not know does not
    count as moving. True where nothing is asked or the job's NCCL is unknown."""
    if way not in ("up", "down") or not here or versions.parse(here) is None:
        return True
    row = kb.torch_nccl_version(torch, cuda)
    if row is None:
        return False
    there, now = versions.key(row.nccl), versions.key(here)
    return there > now if way == "up" else there < now


def _has_nccl(kb: KnowledgeBase, torch: str, cuda: str, least: str | None) -> bool:
    """The build's NCCL is at least `least` (a fixed issue); True when none is asked for."""
    if not least:
        return True
    row = kb.torch_nccl_version(torch, cuda)
    return row is not None and versions.key(row.nccl) >= versions.key(least)


def _variants(
    t: TorchRelease, h: Host, b: Basis, kb: KnowledgeBase
) -> list[tuple[bool, Version, str, bool]]:
    out = []
    for cu in t.cuda:
        cuda = versions.major_minor(cu)
        if cuda is None:
            continue
        if b.glibc and versions.at_least(b.glibc, t.glibc_for(cu)) is False:
            continue
        runs, compat = driver_runs_cuda(kb, h.driver, cuda)
        if runs is False or arch_problem(kb, h.compute_caps, cuda, t.version):
            continue
        out.append((runs is True and not compat, versions.key(cu), cu, compat))
    return out


@dataclass(frozen=True)
class _Fit:
    release: TorchRelease
    python: str | None
    cuda: str
    native: bool
    # runs only through minor-version compatibility (False as well where the table cannot say)
    compat: bool


def _fits(h: Host, b: Basis, want: Want, kb: KnowledgeBase) -> list[_Fit]:
    """Every release that moves the way asked and fits the host, newest first."""
    out = []
    for t in sorted(kb.torch_releases, key=lambda r: versions.key(r.version), reverse=True):
        if not _moves(t, b, want):
            continue
        if want.release and versions.parse(t.version) != versions.parse(want.release):
            continue
        pys = [p for p in b.pythons if _in_range(p, t.python_min, t.python_max)]
        if b.pythons and not pys:
            continue
        here = None if b.current else (h.env.nccl if h.env else None)
        fits = [
            f
            for f in _variants(t, h, b, kb)
            if _has_nccl(kb, t.version, f[2], want.nccl_min)
            and _nccl_moves(kb, t.version, f[2], here, want.direction)
        ]
        if fits:
            native, _, cu, compat = max(fits)
            out.append(_Fit(t, pys[0] if pys else None, cu, native, compat))
    return out


def _issue(i: NcclIssue, kb: KnowledgeBase) -> dict[str, Any]:
    profile = kb.nccl_profile(i.workaround) if i.workaround else None
    return {
        "id": i.id,
        "affected": i.affected,
        "fixed_in": i.fixed_in,
        "symptom": i.symptom,
        "setup": list(i.setup),
        "workaround": i.workaround,
        "workaround_cost": profile.cost if profile else None,
        "source": i.source,
    }


def choose(h: Host, kb: KnowledgeBase, want: Want) -> dict[str, Any] | None:
    """The stack to install, newest first among the releases that move the way asked, passing
    over those whose NCCL has a documented problem on this host's setup while another fits."""
    b = basis(h, kb)
    if not want.assume and (h.glibc is None or not b.pythons):
        return None
    fits = _fits(h, b, want, kb)
    if not fits:
        return None
    maybe = want.setup | want.unread
    clear = [f for f in fits if not setup_issues(kb, f.release.version, maybe, f.cuda)]
    pick = clear[0] if clear else fits[0]
    here = versions.parse(b.current.split("+")[0]) if b.current else None
    same = [f for f in clear if here is not None and versions.parse(f.release.version) == here]
    if want.same_release and same:
        pick = same[0]
    passed = fits[: fits.index(pick)]
    t, py, cu = pick.release, pick.python, pick.cuda
    env = h.env
    tr, tr_note = lib_choice(
        "transformers", kb.transformers_releases, py, t.version, env.transformers if env else None
    )
    ac, ac_note = lib_choice(
        "accelerate", kb.accelerate_releases, py, t.version, env.accelerate if env else None
    )
    build = kb.torch_build(t.version, cu)
    return {
        "smallest_fix": _smallest_fix(clear or fits, pick, want, kb),
        "python": py,
        "torch": t.version,
        "cuda": cu,
        "archs": list(build.archs) if build else None,
        "tag": versions.cuda_tag(versions.major_minor(cu) or (0, 0)),
        "minor_compat": pick.compat,
        "transformers": tr,
        "accelerate": ac,
        "lib_notes": [n for n in (tr_note, ac_note) if n],
        "nccl": _bundled(kb, t.version, cu),
        # torch unread: the NCCL the job loads (a wheel, or the probe's reading) against the one
        # the chosen build bundles still says which way the move goes
        "direction": direction(b.current, t.version)
        or (
            None
            if b.current
            else direction(env.nccl if env else None, _bundled(kb, t.version, cu) or "")
        ),
        "assumed": b.assumed,
        # Newer releases that fit but whose NCCL has a problem on this setup, and the problems
        # the chosen one still has (its plan carries their workaround).
        # (a release passed over to stay on the installed one has none: not listed)
        "passed_over": {
            f.release.version: ids
            for f in passed
            if (ids := [i.id for i in setup_issues(kb, f.release.version, maybe, f.cuda)])
        },
        "nccl_issues": [_issue(i, kb) for i in setup_issues(kb, t.version, want.setup, cu)],
        # Problems it has only if the host is set up the way unread facts cannot rule out.
        "unread_issues": [
            _issue(i, kb)
            for i in setup_issues(kb, t.version, maybe, cu)
            if not set(i.setup) <= want.setup
        ],
        "unread_setup": sorted(want.unread - want.setup),
    }


def _bundled(kb: KnowledgeBase, torch: str, cuda: str) -> str | None:
    row = kb.torch_nccl_version(torch, cuda)
    return row.nccl if row and versions.parse(row.torch) == versions.parse(torch) else None


def _smallest_fix(
    fits: list[_Fit], pick: _Fit, want: Want, kb: KnowledgeBase
) -> dict[str, Any] | None:
    """Moving up to a fixed NCCL: the oldest release that fits and carries the fix, when it is
    not the one chosen. Named beside the choice: fewer changes to the training code, fewer of
    the later fixes."""
    if not want.nccl_min or want.direction != "up":
        return None
    low = min(fits, key=lambda f: versions.key(f.release.version))
    if low is pick:
        return None
    tag = versions.cuda_tag(versions.major_minor(low.cuda) or (0, 0))
    # the NCCL shown as for the chosen stack: that release's own row only (a review: 2.7.1 showed
    # 2.7.0's, which a plan pinning 2.7.1 did not)
    return {
        "torch": low.release.version,
        "tag": tag,
        "nccl": _bundled(kb, low.release.version, low.cuda),
    }


def direction(current: str | None, target: str) -> str | None:
    if not current or versions.parse(current.split("+")[0]) is None or not target:
        return None
    here, there = versions.key(current.split("+")[0]), versions.key(target)
    return "up" if there > here else "down" if there < here else None
