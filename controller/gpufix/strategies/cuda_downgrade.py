"""cuda-downgrade: a torch/CUDA/transformers/accelerate stack that fits the host, in its own venv."""

from __future__ import annotations

from typing import Any

from gpufix import versions
from gpufix.engine import setup, stack_choice
from gpufix.engine.context import Candidate, Ctx
from gpufix.engine.plan import Step
from gpufix.strategies.base import Strategy
from gpufix.strategies.evidence import across_hosts

PLAYBOOK = "cuda_downgrade.yml"
_SETUP_WORDS = {"infiniband": "IB/RoCE devices", "multi-node": "more than one node"}


def want(ctx: Ctx) -> stack_choice.Want:
    """Which way the decision table asks the stack to move (up to a fixed NCCL, or down)."""
    where = setup.shown(ctx.host, across_hosts(ctx))
    unread = setup.unread(ctx.host)
    d = ctx.decision
    if d is None or d.fix != "cuda-downgrade":
        broken = ctx.stack.arch_problem is not None or ctx.stack.driver_ok is False
        return stack_choice.Want(
            setup=where, unread=unread, same_release=broken, release=ctx.c.torch
        )
    return stack_choice.Want(
        d.row.direction,
        d.issue.fixed_in if d.issue else None,
        assume=True,
        setup=where,
        unread=unread,
        release=ctx.c.torch,
    )


def _setup_notes(best: dict[str, Any]) -> tuple[str, list[str]]:
    """What the reason adds about releases passed over for this setup, and the risks of a
    chosen NCCL that still has a documented problem here (with the workaround the plan carries)."""
    unread = " or ".join(_SETUP_WORDS.get(x, x) for x in best["unread_setup"])
    passed = "; ".join(
        f"not torch {v}: its NCCL has {', '.join(ids)} on this setup"
        + (f" if it has {unread} (the facts do not say)" if unread else "")
        for v, ids in best["passed_over"].items()
    )
    risks = [
        f"NCCL {best['nccl']} has {i['id']} on this setup ({i['symptom']}; fixed in NCCL "
        f"{i['fixed_in']}, which no torch release in the knowledge base that fits bundles)"
        + (
            f": the interim writes NCCL profile {i['workaround']} and it stays with this stack"
            f" (cost: {i['workaround_cost']})"
            if i["workaround"]
            else ""
        )
        for i in best["nccl_issues"]
    ]
    if best["unread_issues"]:
        risks.append(
            f"the facts do not say whether the host has {unread} (network not read):"
            " if it does, NCCL "
            f"{best['nccl']} has "
            + "; ".join(
                f"{i['id']} ({i['symptom']}; fixed in NCCL {i['fixed_in']}"
                + (f"; NCCL profile {i['workaround']} avoids it" if i["workaround"] else "")
                + ")"
                for i in best["unread_issues"]
            )
        )
    return passed, risks


def best_stack(ctx: Ctx) -> dict[str, Any] | None:
    """The stack to install: the newest that fits glibc, Python, driver and GPUs and moves the
    way the evidence asks. Within one torch release, a CUDA variant the driver supports outright
    beats one it runs only through minor-version compatibility (no PTX JIT for newer code)."""
    return stack_choice.choose(ctx.host, ctx.kb, want(ctx))


def _why(ctx: Ctx, best: dict[str, Any]) -> str:
    h = ctx.host
    target = f"torch {best['torch']}+{best['tag']}"
    if best.get("nccl"):
        target += f" (NCCL {best['nccl']})"
    libs = f" with transformers {best['transformers']} and accelerate {best['accelerate']}"
    moved = {"up": "up to", "down": "down to"}.get(best["direction"] or "", "to")
    d = ctx.decision
    here = (h.env.torch or "").split("+")[0] if h.env else ""
    if ctx.c.torch:
        reason = f"the release --torch names{'; ' + d.row.why if d and d.fix == 'cuda-downgrade' else ''}"
    elif d is not None and d.fix == "cuda-downgrade":
        reason = d.row.why
    elif here and here == best["torch"]:
        # the installed release, another CUDA build of it (same_release): not "the newest"
        reason = f"the installed torch release, its {best['tag']} build"
    else:
        reason = "the newest stack that fits"
    low = best.get("smallest_fix")
    if low:
        reason += (
            f" (torch {low['torch']}+{low['tag']}"
            + (f", NCCL {low['nccl']}," if low["nccl"] else "")
            + " is the smallest move that carries the fix: fewer changes to the training code)"
        )
    fits = f"fits glibc {h.glibc or 'unknown'}, driver {h.driver or 'unknown'}"
    if h.compute_caps:
        fits += f" and compute capability {'/'.join(sorted(set(h.compute_caps)))}"
    if best["archs"]:
        fits += f" (the build has kernels for sm_{', sm_'.join(a.replace('.', '') for a in best['archs'])})"
    return f"move {moved} {target}{libs} on Python {best['python'] or 'unknown'}: {reason}; {fits}"


def _vars(ctx: Ctx, best: dict[str, Any]) -> dict[str, Any]:
    py = best["python"]
    vars_: dict[str, Any] = {
        "gpufix_ml_stack_venv": ctx.c.venv_path,
        "gpufix_ml_stack_torch_version": best["torch"],
        "gpufix_ml_stack_torch_variant": best["tag"],
        "gpufix_ml_stack_torch_index_url": f"https://download.pytorch.org/whl/{best['tag']}",
        "gpufix_ml_stack_transformers_version": best["transformers"],
        "gpufix_ml_stack_accelerate_version": best["accelerate"],
    }
    if py:
        vars_["gpufix_ml_stack_python"] = ctx.host.python_paths.get(py, f"/usr/bin/python{py}")
    return vars_


def evaluate(ctx: Ctx) -> Candidate:
    h = ctx.host
    if h.gpu_count == 0:
        return Candidate("cuda-downgrade", False, "no GPU")
    best = best_stack(ctx)
    if best is None and ctx.c.torch:
        w = want(ctx)
        pinned = versions.parse(ctx.c.torch)
        if not any(versions.parse(t.version) == pinned for t in ctx.kb.torch_releases):
            return Candidate(
                "cuda-downgrade",
                False,
                f"torch {ctx.c.torch} (--torch) is not a release the knowledge base records",
            )
        return Candidate(
            "cuda-downgrade",
            False,
            f"torch {ctx.c.torch} (--torch) does not fit "
            f"{_basis_text(stack_choice.basis(h, ctx.kb))} and driver {h.driver or 'unknown'}"
            + (f", or does not move {w.direction}" if w.direction else "")
            + (f", or its NCCL is older than {w.nccl_min}, the fix" if w.nccl_min else ""),
        )
    b = stack_choice.basis(h, ctx.kb)
    pythons = b.pythons
    unread = [n for n, v in (("glibc", h.glibc), ("Python", pythons)) if not v]
    if best is None and unread and not want(ctx).assume:
        # stack_choice.choose picks on unread facts only where the evidence asks for a stack
        return Candidate(
            "cuda-downgrade",
            False,
            f"{' and '.join(unread)} not in the facts, and the evidence does not ask for a stack "
            "change: no stack is chosen on unread facts",
        )
    if best is None:
        return Candidate(
            "cuda-downgrade",
            False,
            f"no torch release fits {_basis_text(b)} and driver {h.driver or 'unknown'}"
            + (" and moves the way the evidence asks" if want(ctx).direction else ""),
        )
    current = h.env.torch if h.env else None
    same = (
        current is not None
        # the release without its local tag ("2.8.0+cu126" is release 2.8.0 of build cu126)
        and versions.parse(current.split("+")[0]) == versions.parse(best["torch"])
        and (versions.local_tag(current) == best["tag"])
    )
    if same and ctx.stack.driver_ok is not False and not ctx.stack.arch_problem:
        return Candidate(
            "cuda-downgrade",
            False,
            f"the installed torch {current} is already "
            + ("the release --torch names" if ctx.c.torch else "the newest stack that fits"),
        )
    why = _why(ctx, best)
    passed, setup_risks = _setup_notes(best)
    if passed:
        why += f"; {passed}"
    step = Step(
        PLAYBOOK, f"build a venv at {ctx.c.venv_path}: {why.split(':')[0]}", _vars(ctx, best)
    )
    outcome = (
        f"training runs from {ctx.c.venv_path} with torch {best['torch']}+{best['tag']}; "
        "driver and kernel unchanged, no reboot"
    )
    if h.driver is None:
        outcome += (
            f" (driver unknown: the ml_stack role refuses CUDA {best['cuda']} if the installed"
            " driver cannot run it)"
        )
    elif best["minor_compat"]:
        outcome += (
            f" (driver {h.driver} runs CUDA {best['cuda']} through minor-version compatibility)"
        )
    risks = [*best["assumed"], *setup_risks, *best.get("lib_notes", [])]
    risks.append(
        f"the venv gets torch, transformers and accelerate only: the job's other packages "
        f"(DeepSpeed, vLLM, its own requirements) go into it too, at versions built for torch "
        f"{best['torch']} (gpufix_ml_stack_extra_requirements); until then a job started from "
        "it cannot import them"
    )
    if current and versions.parse(current.split("+")[0]) != versions.parse(best["torch"]):
        risks.append(f"code written for torch {current} may need changes for {best['torch']}")
    if h.kernel and versions.at_least(h.kernel, ctx.kb.accelerate_kernel_check.threshold) is False:
        risks.append("accelerate will still print the kernel warning; it is a risk factor only")
    missing = ["python-env"] if best["assumed"] else []
    extra: dict[str, Any] = {"stack": best, **_direction(ctx, best)}
    companions = [i["workaround"] for i in best["nccl_issues"] if i["workaround"]]
    if companions:
        # explain.interim_for writes these beside the stack (gpufix apply PLANFILE --interim).
        extra["nccl_companion"] = {
            "profiles": companions,
            "issues": [i["id"] for i in best["nccl_issues"]],
        }
    return Candidate(
        "cuda-downgrade", True, why, [step], outcome, risks, extra=extra, missing=missing
    )


def _direction(ctx: Ctx, best: dict[str, Any]) -> dict[str, Any]:
    """Which way the stack moves: against the installed torch (or the NCCL the job loads);
    where neither is known, the way the evidence asks (a newer NCCL), and `stack_direction_from`
    says which."""
    if best["direction"]:
        return {"stack_direction": best["direction"], "stack_direction_from": "installed"}
    wanted = want(ctx).direction
    env = ctx.host.env
    if wanted in ("up", "down") and not (env and (env.torch or env.nccl)):
        return {"stack_direction": wanted, "stack_direction_from": "evidence"}
    return {"stack_direction": None, "stack_direction_from": None}


def _basis_text(b: stack_choice.Basis) -> str:
    """glibc and Python as the choice saw them: read, the release's where assumed
    (stack_choice.basis), or unknown."""
    glibc = b.glibc or "unknown"
    python = "/".join(b.pythons) or "unknown"
    if b.glibc_assumed:
        glibc += " (the release's, assumed)"
    if b.pythons_assumed:
        python += " (the release's, assumed)"
    return f"glibc {glibc}, Python {python}"


STRATEGY = Strategy(
    name="cuda-downgrade",
    evaluate=evaluate,
    playbook=PLAYBOOK,
    watched_files=(),  # a new venv; the host's own files are untouched
    disk_need_mib=(0, 6144),
    reboot_after_restore=False,
)
