"""Make plans: gather facts (or read a snapshot), optionally probe, decide. Shared by `plan`,
`apply --strategy` and apply's re-derivation of a plan file; the CLI only parses and prints.

Every plan records what the engine was given (`inputs`) and which interpreter verifies it, so
`plan_host` on a plan's own inputs gives back the same plan (docs/security.md).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import date
from pathlib import Path
from typing import Any

from gpufix import runner
from gpufix.apply.varspec import PATTERNS
from gpufix.engine.context import Constraints
from gpufix.engine.decide import decide
from gpufix.engine.kb import KnowledgeBase
from gpufix.engine.kb import load as load_kb
from gpufix.engine.plan import Plan
from gpufix.engine.rules import Rules
from gpufix.engine.rules import load as load_rules
from gpufix.errors import InvalidInput
from gpufix.inputs import one_line
from gpufix.runner import FACTS_TIMEOUT_S, FORKS
from gpufix.strategies import NAMES

# An interpreter gpufix runs on a host (facts' python_envs, the probe): an absolute path, no
# spaces, quotes or braces, whose last part is python[X[.Y]] (gpufix.apply.varspec "python").
PYTHON = re.compile(r"^/([A-Za-z0-9._+-]+/){0,64}python[0-9.]{0,8}$")
# the strategies that run the image --image names
IMAGE_STRATEGIES = ("container-fallback", "container-fix")
_CONSTRAINT_PATTERNS = {
    "container_image": re.compile(PATTERNS["image_digest"]),
    "venv_path": re.compile(PATTERNS["abspath"]),
    # a release as PyPI names it: 2.5.1, never 02.5.1 (PEP 440 would read it as 2.5.1, and the
    # plan would record one spelling and install another)
    "torch": re.compile(r"^(0|[1-9][0-9]{0,2})\.(0|[1-9][0-9]{0,2})\.(0|[1-9][0-9]{0,2})$"),
}
# An inventory host name, as the plan schema's "host": TARGET names the planned host only then.
HOST = re.compile(PATTERNS["inventory_host"])
ML_STACK_PLAYBOOK = "cuda_downgrade.yml"
ML_STACK_VENV_DEFAULT = "/opt/gpufix/venv"  # roles/ml_stack/defaults: gpufix_ml_stack_venv


@dataclass
class Failure:
    host: str
    error: str
    unreachable: bool


@dataclass
class Planned:
    plans: list[Plan] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)


def check_python_envs(python_envs: list[str] | None) -> None:
    """--python-env: each an absolute path to a python interpreter, or refused (exit 3)."""
    for py in python_envs or []:
        if not PYTHON.fullmatch(py):
            raise InvalidInput(
                f"--python-env {one_line(repr(py), 80)}: give the absolute path of a python "
                "interpreter (.../python, .../python3, .../python3.9), without spaces or quotes"
            )


# Constraints added after plan files were first written: left out while unset, so that a plan
# file made before them re-derives to the same plan (a review: every older file was "edited").
_LATER_CONSTRAINTS = ("torch",)


def constraints_to_dict(c: Constraints) -> dict[str, Any]:
    """JSON-native: the plan date as YYYY-MM-DD."""
    d = asdict(c)
    return {
        k: (v.isoformat() if isinstance(v, date) else v)
        for k, v in d.items()
        if not (k in _LATER_CONSTRAINTS and v is None)
    }


def plan_date(text: str, where: str = "plan") -> date:
    """A plan's date, YYYY-MM-DD in ASCII digits only (date.fromisoformat also takes 20261206
    and other ISO forms)."""
    try:
        if not re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", text):
            raise ValueError(text)
        return date.fromisoformat(text)
    except ValueError:
        raise InvalidInput(f"{where}: inputs/constraints/plan_date: not YYYY-MM-DD") from None


def constraints_from_dict(d: Mapping[str, Any], where: str = "plan") -> Constraints:
    """Constraints from a plan's inputs: unknown names and wrong types are refused."""
    known = {f.name: f for f in fields(Constraints)}
    unknown = sorted(set(d) - set(known))
    if unknown:
        raise InvalidInput(f"{where}: inputs/constraints/{unknown[0]}: not a planning constraint")
    defaults = asdict(Constraints())
    given = dict(d)
    if isinstance(given.get("plan_date"), str):  # the day the plan was made: judged as of then
        given["plan_date"] = plan_date(given["plan_date"], where)
    for k, v in given.items():
        if k == "plan_date":
            if v is not None and not isinstance(v, date):
                raise InvalidInput(f"{where}: inputs/constraints/plan_date: not YYYY-MM-DD")
            continue
        want = type(defaults[k]) if defaults[k] is not None else (str, type(None))
        if isinstance(v, bool) != isinstance(defaults[k], bool) or not isinstance(v, want):
            raise InvalidInput(f"{where}: inputs/constraints/{k}: wrong type {type(v).__name__}")
        pattern = _CONSTRAINT_PATTERNS.get(k)
        if isinstance(v, str) and pattern and not pattern.fullmatch(v):
            raise InvalidInput(f"{where}: inputs/constraints/{k}: not a valid value")
    if given.get("venv_path", ML_STACK_VENV_DEFAULT) != ML_STACK_VENV_DEFAULT:
        # no option sets it: a plan file cannot choose where root installs a stack
        raise InvalidInput(
            f"{where}: inputs/constraints/venv_path: gpufix plans only {ML_STACK_VENV_DEFAULT}"
        )
    if given.get("strategy") is not None and given["strategy"] not in NAMES:
        raise InvalidInput(f"{where}: inputs/constraints/strategy: not a strategy")
    return Constraints(**given)


def verify_python(plan: Plan, facts: Mapping[str, Any]) -> dict[str, str]:
    """The interpreter the post-change probe uses: the venv a cuda-downgrade step builds, else
    the first interpreter in the facts' python_envs that has torch (the training environment,
    from --python-env or the host's python3), else none (probe.yml's default)."""
    for s in plan.steps:
        if s.playbook == ML_STACK_PLAYBOOK:
            venv = str(s.vars.get("gpufix_ml_stack_venv") or ML_STACK_VENV_DEFAULT)
            return {"python": venv.rstrip("/") + "/bin/python", "from": "the venv this plan builds"}
    envs = facts.get("python_envs")
    for env in envs if isinstance(envs, list) else []:
        if not isinstance(env, dict):
            continue
        py, pkgs = env.get("python"), env.get("packages")
        torch = pkgs.get("torch") if isinstance(pkgs, dict) else None
        if isinstance(py, str) and PYTHON.fullmatch(py) and isinstance(torch, str) and torch:
            return {"python": py, "from": f"facts: python_envs ({py} has torch {torch})"}
    return {"from": "no interpreter with torch in the facts: give --python-env at plan time"}


def verify_nccl_defaults(plan: Plan) -> list[str]:
    """NCCL settings the probe after the fix runs at NCCL's default (engine/explain.py
    verify_defaults): an "off" the host's NCCL settings hold that is a workaround here. Otherwise
    the probe reads it too and cannot show that the fix works without it (docs/apply.md)."""
    found = plan.extra.get("nccl_defaults")
    return [str(k) for k in found] if isinstance(found, list) else []


def plan_host(
    facts: Mapping[str, Any],
    verdict: dict[str, Any] | None,
    constraints: Constraints,
    *,
    host: str,
    python_envs: list[str] | None,
    kb: KnowledgeBase,
    rules: Rules,
    facts_host: str | None = None,
) -> Plan:
    """One host's plan, with its inputs recorded. Pure: the same inputs give the same plan.

    `facts_host`: the host name a snapshot file was recorded under, when the plan is for another
    name (`gpufix plan TARGET --facts FILE`); the plan says so, and a verdict recorded on either
    name is this machine's."""
    gpus = facts.get("gpus")
    listed = len(gpus) if isinstance(gpus, list) else 0
    na = verdict is not None and verdict.get("verdict") == "not-applicable"
    # The probe saw no GPU where the facts list some (a container without them, an empty
    # CUDA_VISIBLE_DEVICES): it tested nothing, so it is no evidence; planned on, it would read
    # the warnings as if a probe had failed (a kernel reboot on bionic).
    blind = na and listed > 0
    plan = decide(
        facts, None if blind else verdict, constraints, kb=kb, rules=rules, host_name=host
    )
    if blind:
        plan = replace(plan, probe_verdict="not-applicable")
    risks = []
    if blind:
        risks.append(
            f"the probe saw no NVIDIA GPU, but the facts list {listed}: planned as if no "
            "probe had run; probe where the GPUs are visible (not in a container without them, "
            "CUDA_VISIBLE_DEVICES not empty)"
        )
    if facts_host is not None and facts_host != host:
        risks.append(
            f"the facts were recorded on '{one_line(facts_host, 120)}' and are planned for "
            f"{host!r}: apply gathers {host!r}'s facts again and refuses the plan if they differ"
        )
    names = {host, facts_host}
    if verdict is not None and not names & set(verdict_hosts(verdict)):
        # a multi-node run's group name is its hosts joined: name each host once
        recorded = one_line(", ".join(_run_hosts(verdict) or verdict_hosts(verdict)), 120)
        other = another_machine(facts, verdict)
        if other:
            # a verdict named for none of this host's names is read as its evidence only when
            # nothing in it says otherwise (a review: another machine's torch stack replaced
            # host01's and made a driver-pin plan with a reboot)
            raise InvalidInput(
                f"the probe verdict was recorded on {recorded!r}, not on {host!r}, and {other}: "
                "another machine's evidence; probe this host (gpufix probe HOST)"
            )
        risks.append(
            f"the probe verdict was recorded on {recorded!r}, not on {host!r}: its evidence is "
            "read as this host's; probe this host (gpufix probe HOST) if it is another machine"
        )
    if risks:
        plan = replace(plan, risks=[*plan.risks, *risks])
    inputs: dict[str, Any] = {
        "facts": dict(facts),
        "verdict": verdict,
        "constraints": constraints_to_dict(constraints),
        "python_envs": list(python_envs or []),
    }
    if facts_host is not None and facts_host != host:
        inputs["facts_host"] = facts_host
    verify = verify_python(plan, facts)
    defaults = verify_nccl_defaults(plan)
    if defaults:
        verify["nccl_defaults"] = ",".join(defaults)
    return replace(plan, inputs=inputs, verify=verify)


_DRIVER_VERSION = re.compile(r"\b(\d{3,4}\.\d{1,3}(?:\.\d{1,3})?)\b")


def _part(doc: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = doc.get(key)
    return value if isinstance(value, dict) else {}


def another_machine(facts: Mapping[str, Any], verdict: Mapping[str, Any]) -> str | None:
    """What in a verdict's own readings (the driver it loaded, the kernel it ran on) differs from
    the host's facts, or None: both read the same machine, the probe at most later."""
    seen, driver, kernel = _part(verdict, "facts"), _part(facts, "driver"), _part(facts, "kernel")
    m = _DRIVER_VERSION.search(str(seen.get("driver") or ""))
    mine = driver.get("kernel_module") or driver.get("userspace")
    if m and isinstance(mine, str) and mine and m.group(1) != mine:
        return f"its driver {m.group(1)} is not this host's {one_line(mine, 40)}"
    theirs, running = seen.get("kernel"), kernel.get("running")
    if isinstance(theirs, str) and isinstance(running, str) and theirs and running != theirs:
        return f"its kernel {one_line(theirs, 60)} is not this host's {one_line(running, 60)}"
    return None


def verdict_hosts(verdict: Mapping[str, Any]) -> list[str]:
    """The hosts a verdict speaks for: the inventory name probed and the machine's hostname (the
    program's `host`; a multi-node run's group), and a multi-node run's hosts."""
    named = [verdict.get("inventory_host"), verdict.get("host")]
    return [*dict.fromkeys(str(h) for h in named if h), *_run_hosts(verdict)] or [""]


def _run_hosts(verdict: Mapping[str, Any]) -> list[str]:
    """A multi-node run's hosts ([] for a run on one host)."""
    hosts = verdict.get("hosts") if verdict.get("scope") == "multi-node" else None
    return [str(h) for h in hosts] if isinstance(hosts, list) else []


def bind_verdict(
    hosts: list[str], verdict: dict[str, Any] | None, failed: list[str] | None = None
) -> dict[str, dict[str, Any] | None]:
    """Which planned host gets the saved verdict: the hosts it was recorded on. A verdict that
    names none of the hosts targeted (`hosts` planned, `failed` not reached) goes to a lone
    host (the plan says so: a snapshot's host name is often not the probe's), and is refused
    for several (whose evidence would it be?)."""
    if verdict is None:
        return {}
    named = verdict_hosts(verdict)
    if any(h in named for h in failed or []):
        return {}  # that host's verdict, and that host was not reached
    bound: dict[str, dict[str, Any] | None] = {h: verdict for h in hosts if h in named}
    if bound:
        return bound
    if len(hosts) == 1 and not failed:
        return {hosts[0]: verdict}
    if not hosts:
        return {}
    targeted = [*hosts, *(failed or [])]
    shown = ", ".join(targeted[:5]) + (", ..." if len(targeted) > 5 else "")
    raise InvalidInput(
        f"probe verdict recorded on {one_line(', '.join(named), 120)!r}, which is none of the "
        f"{len(targeted)} hosts planned ({one_line(shown, 200)}): plan that host alone, or "
        "give its verdict"
    )


def _check_constraints(constraints: Constraints) -> None:
    """The options that name things no fact checks (--image, --torch): well-formed and used
    with the strategy that takes them, or a one-line InvalidInput."""
    image = constraints.container_image
    if image and not _CONSTRAINT_PATTERNS["container_image"].fullmatch(image):
        raise InvalidInput(f"--image {image[:200]!r}: give REF@sha256:<64 hex digits>")
    release = constraints.torch
    if release is not None and not _CONSTRAINT_PATTERNS["torch"].fullmatch(release):
        raise InvalidInput(f"--torch {release[:40]!r}: give a torch release such as 2.7.1")
    if release and constraints.strategy != "cuda-downgrade":
        raise InvalidInput(
            "--torch names the release cuda-downgrade installs: give --strategy cuda-downgrade"
            + (f", not {constraints.strategy}" if constraints.strategy else "")
        )
    if image and not constraints.containers_allowed:
        raise InvalidInput("--image names a container image, --no-containers rules them out")
    if image and constraints.strategy not in (None, *IMAGE_STRATEGIES):
        raise InvalidInput(
            f"--image is used by {' and '.join(IMAGE_STRATEGIES)}, not --strategy "
            f"{constraints.strategy}"
        )


def make_plans(
    target: str,
    inventory: Path,
    constraints: Constraints,
    *,
    facts_file: Path | None = None,
    verdict: dict[str, Any] | None = None,
    run_probe: bool = False,
    job_env: tuple[str, ...] = (),
    python_envs: list[str] | None = None,
    progress: runner.Progress | None = None,
    forks: int = FORKS,
    facts_timeout: int = FACTS_TIMEOUT_S,
) -> Planned:
    """Plans for TARGET (a host or group of the inventory), or for one snapshot file. `forks`
    goes to every Ansible run (facts, probe), `facts_timeout` to the fact-gathering run."""
    from gpufix.facts.snapshot import load_snapshot

    check_python_envs(python_envs)
    _check_constraints(constraints)
    kb, rules = load_kb(), load_rules()
    if constraints.plan_date is None:  # support windows are judged on the day the plan is made
        constraints = replace(constraints, plan_date=date.today())
    out = Planned()
    facts_host: str | None = None
    if facts_file is not None:
        snap = load_snapshot(facts_file)
        if HOST.fullmatch(target) and target != snap.host:
            # planned for TARGET, the name apply will reach; the plan records the snapshot's
            facts_host = snap.host
            snap = replace(snap, host=target)
        snaps = [snap]
    else:
        from gpufix.facts.collect import gather

        got = gather(
            target,
            inventory,
            python_envs=python_envs,
            progress=progress,
            forks=forks,
            timeout=facts_timeout,
        )
        snaps = [g.snapshot for g in got if g.snapshot is not None]
        out.failures = [Failure(g.host, g.error, g.unreachable) for g in got if g.snapshot is None]
    # every host targeted, answered or not: a verdict from one that failed goes to no other
    verdicts = bind_verdict([s.host for s in snaps], verdict, [f.host for f in out.failures])
    if run_probe and facts_file is None:
        from gpufix.probe.options import ProbeOptions
        from gpufix.probe.remote import probe_hosts

        opts = ProbeOptions(job_env=job_env)
        hosts = [s.host for s in snaps]
        probed = probe_hosts(hosts, inventory, options=opts, progress=progress, forks=forks)
        # a host the probe never reached has no verdict (and no plan: it answered nothing now);
        # nor has one another gpufix run is changing (not probed: exit 1, not 4)
        lost = {h: v for h, v in probed.items() if v.get("reached") is False}
        out.failures += [
            Failure(h, str(v.get("error")), not v.get("held")) for h, v in lost.items()
        ]
        snaps = [s for s in snaps if s.host not in lost]
        verdicts.update({h: v for h, v in probed.items() if h not in lost})
    refused: list[str] = []
    for s in snaps:
        try:
            plan = plan_host(
                s.facts,
                verdicts.get(s.host),
                constraints,
                host=s.host,
                python_envs=python_envs,
                kb=kb,
                rules=rules,
                facts_host=facts_host,
            )
        except InvalidInput as e:
            if not constraints.strategy or len(snaps) == 1:
                raise
            why = str(e).removeprefix(
                f"strategy {constraints.strategy} is not feasible for {s.host}: "
            )
            refused.append(f"{s.host} ({why})")  # every host that cannot take it, in one line
            continue
        out.plans.append(plan)
    if refused:
        raise InvalidInput(
            f"strategy {constraints.strategy} is not feasible for {len(refused)} of "
            f"{len(snaps)} hosts: {', '.join(refused)}"
        )
    return out
