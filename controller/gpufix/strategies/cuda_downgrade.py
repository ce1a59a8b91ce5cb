"""cuda-downgrade: a torch/CUDA/transformers/accelerate stack that fits the host, in its own venv."""

from __future__ import annotations

from typing import Any

from packaging.version import Version

from gpufix import versions
from gpufix.engine.context import Candidate, Ctx
from gpufix.engine.kb import LibRelease
from gpufix.engine.plan import Step
from gpufix.engine.stack import arch_problem, driver_runs_cuda
from gpufix.strategies.base import Strategy

PLAYBOOK = "cuda_downgrade.yml"


def best_stack(ctx: Ctx) -> dict[str, Any] | None:
    """The newest torch/CUDA/transformers/accelerate that fits glibc, Python, driver and GPUs.

    Within one torch release, a CUDA variant the driver supports outright beats one it runs
    only through minor-version compatibility (no PTX JIT for newer code).
    """
    h, kb = ctx.host, ctx.kb
    found = [versions.major_minor(p) for p in (*h.pythons, h.env.version if h.env else None)]
    pythons = sorted({p for p in found if p is not None}, reverse=True)
    if not pythons or h.glibc is None:
        return None
    torches = sorted(kb.torch_releases, key=lambda t: versions.key(t.version), reverse=True)
    for t in torches:
        for py in pythons:
            pys = f"{py[0]}.{py[1]}"
            if not _in_range(pys, t.python_min, t.python_max):
                continue
            fits: list[tuple[bool, Version, str]] = []
            for cu in t.cuda:
                cuda = versions.major_minor(cu)
                if cuda is None or versions.at_least(h.glibc, t.glibc_for(cu)) is False:
                    continue
                runs, compat = driver_runs_cuda(kb, h.driver, cuda)
                if runs is True and not arch_problem(kb, h.compute_caps, cuda, t.version):
                    fits.append((not compat, versions.key(cu), cu))
            if not fits:
                continue
            native, _, cu = max(fits)
            tr = _newest_lib(kb.transformers_releases, pys, t.version)
            ac = _newest_lib(kb.accelerate_releases, pys, t.version)
            build = kb.torch_build(t.version, cu)
            return {
                "python": pys,
                "torch": t.version,
                "cuda": cu,
                # the build's architecture list when recorded (torch_builds.yaml)
                "archs": list(build.archs) if build else None,
                "tag": versions.cuda_tag(versions.major_minor(cu) or (0, 0)),
                "minor_compat": not native,
                "transformers": tr.version if tr else None,
                "accelerate": ac.version if ac else None,
            }
    return None


def _in_range(py: str, lo: str | None, hi: str | None) -> bool:
    v = versions.major_minor(py)
    if lo and v < versions.major_minor(lo):  # type: ignore[operator]
        return False
    return not (hi and v > versions.major_minor(hi))  # type: ignore[operator]


def _newest_lib(rows: tuple[LibRelease, ...], py: str, torch: str) -> LibRelease | None:
    ok = [
        r
        for r in rows
        if _in_range(py, r.python_min, r.python_max)
        and (not r.torch_min or versions.at_least(torch, r.torch_min))
    ]
    return max(ok, key=lambda r: versions.key(r.version), default=None)


def evaluate(ctx: Ctx) -> Candidate:
    h = ctx.host
    if h.gpu_count == 0:
        return Candidate("cuda-downgrade", False, "no GPU")
    best = best_stack(ctx)
    if best is None:
        return Candidate(
            "cuda-downgrade",
            False,
            f"no torch release fits glibc {h.glibc}, Python {'/'.join(h.pythons) or 'unknown'} and driver {h.driver}",
        )
    want = f"{best['torch']}+{best['tag']}"
    current = h.env.torch if h.env else None
    same = (
        current is not None
        and versions.parse(current) == versions.parse(best["torch"])
        and (versions.local_tag(current) == best["tag"])
    )
    if same and ctx.stack.driver_ok is not False and not ctx.stack.arch_problem:
        return Candidate(
            "cuda-downgrade",
            False,
            f"the installed torch {current} is already the newest stack that fits",
        )
    py = best["python"]
    why = (
        f"torch {want} with transformers {best['transformers']} and accelerate {best['accelerate']} "
        f"on Python {py}: the newest stack that fits glibc {h.glibc}, driver {h.driver}"
        + (
            f" and compute capability {'/'.join(sorted(set(h.compute_caps)))}"
            if h.compute_caps
            else ""
        )
        + (
            f" (the build has kernels for sm_{', sm_'.join(a.replace('.', '') for a in best['archs'])})"
            if best["archs"]
            else ""
        )
    )
    step = Step(
        PLAYBOOK,
        f"build a venv at {ctx.c.venv_path} with {why.split(':')[0]}",
        {
            "gpufix_ml_stack_venv": ctx.c.venv_path,
            "gpufix_ml_stack_python": h.python_paths.get(py, f"/usr/bin/python{py}"),
            "gpufix_ml_stack_torch_version": best["torch"],
            "gpufix_ml_stack_torch_variant": best["tag"],
            "gpufix_ml_stack_torch_index_url": f"https://download.pytorch.org/whl/{best['tag']}",
            "gpufix_ml_stack_transformers_version": best["transformers"],
            "gpufix_ml_stack_accelerate_version": best["accelerate"],
        },
    )
    outcome = (
        f"training runs from {ctx.c.venv_path} with {want}; driver and kernel unchanged, no reboot"
    )
    if best["minor_compat"]:
        outcome += (
            f" (driver {h.driver} runs CUDA {best['cuda']} through minor-version compatibility)"
        )
    risks = []
    if current:
        risks.append(f"code written for torch {current} may need changes for {best['torch']}")
    if h.kernel and versions.at_least(h.kernel, ctx.kb.accelerate_kernel_check.threshold) is False:
        risks.append("accelerate will still print the kernel warning; it is a risk factor only")
    return Candidate("cuda-downgrade", True, why, [step], outcome, risks, extra={"stack": best})


STRATEGY = Strategy(
    name="cuda-downgrade",
    evaluate=evaluate,
    playbook=PLAYBOOK,
    watched_files=(),  # a new venv; the host's own files are untouched
    disk_need_mib=(0, 6144),
    reboot_after_restore=False,
)
