"""A plan file is a request, not a program (docs/security.md).

`apply PLANFILE` runs the engine again on what the plan says it was given (facts, probe verdict,
constraints, interpreters) and refuses the file unless the result is the same plan, field for
field. Steps, variables, strategy, reboot flags: the engine is their only author. Freshness
(gpufix.apply.freshness) then ties the recorded facts to the live host.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import date, timedelta
from typing import Any

from gpufix import inputs as inp
from gpufix.engine.kb import KnowledgeBase
from gpufix.engine.plan import Plan
from gpufix.engine.rules import Rules
from gpufix.errors import InvalidInput
from gpufix.facts.snapshot import FORMAT as FACTS_FORMAT
from gpufix.facts.snapshot import VERSION as FACTS_VERSION
from gpufix.planning import constraints_from_dict, plan_date, plan_host

REPLAN = "re-plan with `gpufix plan ... -o PLANFILE`"


class NotDerived(InvalidInput):
    """The engine gives no plan from a plan file's recorded inputs (a forced strategy they make
    infeasible): the file was edited. `why` says so without speaking of the host, which apply
    has not read yet (the engine's own message would: "already on ...")."""

    def __init__(self, where: str, why: str) -> None:
        super().__init__(f"{where}: {why}")
        self.why = why


def check_facts(facts: Any, host: str, where: str) -> None:
    doc = {
        "format": FACTS_FORMAT,
        "version": FACTS_VERSION,
        "host": host,
        "gathered_at": "1970-01-01T00:00:00Z",
        "facts": facts,
    }
    inp.validate(doc, "facts", where)


def rederive(
    plan: Plan, kb: KnowledgeBase, rules: Rules, where: str, day: date | None = None
) -> Plan:
    """The plan the engine makes from this plan's recorded inputs (validated first); with
    `day`, as if it were made that day (NVIDIA's support windows judged then)."""
    got = plan.inputs
    if not got:
        raise InvalidInput(
            f"{where}: the plan records no inputs, so it cannot be checked: {REPLAN}"
        )
    check_facts(got["facts"], plan.host, f"{where}: inputs/facts")
    if got["verdict"] is not None:
        inp.check_probe_verdict(got["verdict"], f"{where}: inputs/verdict")
    envs = list(got["python_envs"])
    gathered = got["facts"].get("python_envs")
    named = (
        [e.get("python") for e in gathered if isinstance(e, dict)]
        if isinstance(gathered, list)
        else []
    )
    if envs and named != envs:
        # freshness runs these interpreters on the host: only the ones the facts came from
        raise InvalidInput(
            f"{where}: inputs/python_envs: not the interpreters the recorded facts were "
            f"gathered with: {REPLAN}"
        )
    constraints = constraints_from_dict(got["constraints"], where)
    if day is not None:
        constraints = replace(constraints, plan_date=day)
    try:
        return plan_host(
            got["facts"],
            got["verdict"],
            constraints,
            host=plan.host,
            python_envs=envs,
            kb=kb,
            rules=rules,
            facts_host=got.get("facts_host"),
        )
    except InvalidInput as e:
        forced = constraints.strategy
        if forced and str(e).startswith(f"strategy {forced} is not feasible"):
            raise NotDerived(where, f"strategy {forced} is not feasible with them") from e
        raise NotDerived(where, "the engine refuses them") from e


def _normal(plan: Plan) -> Any:
    # the plan's own key order (strategy before steps before outcome): the first difference
    # named is the one a reviewer should read first
    return json.loads(json.dumps(plan.to_dict(), default=str))


def first_difference(a: Any, b: Any, path: str = "") -> str | None:
    """The first path (a/b/0/c) where two JSON values differ, or None when they are equal;
    keys in a's order, then b's own."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in [*a, *(k for k in b if k not in a)]:
            if k not in a or k not in b:
                return f"{path}/{k}".lstrip("/")
            d = first_difference(a[k], b[k], f"{path}/{k}")
            if d is not None:
                return d
        return None
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            d = first_difference(x, y, f"{path}/{i}")
            if d is not None:
                return d
        return None if len(a) == len(b) else f"{path}/{min(len(a), len(b))}".lstrip("/")
    if type(a) is not type(b) or a != b:
        return path.lstrip("/") or "(plan)"
    return None


def check_plans(
    plans: list[Plan], kb: KnowledgeBase, rules: Rules, where: str, today: date | None = None
) -> None:
    """Refuse (exit 3, nothing run) unless every plan is what the engine derives from its inputs,
    and what it derives from them today: a plan made before a driver branch's support ended must
    not install that branch after it ended."""
    edited: list[str] = []
    today = today or date.today()
    for i, p in enumerate(plans):
        here = f"{where}: {p.host}"
        if p.kb_digest != str(kb.digest):
            raise InvalidInput(
                f"stale plan, refusing to apply ({p.host}: it was made with another knowledge "
                f"base than this gpufix's, or its kb_digest was edited): {REPLAN}"
            )
        made = (p.inputs.get("constraints") or {}).get("plan_date")
        if isinstance(made, str) and plan_date(made, here) > today + timedelta(days=1):
            # a day of slack for a planner in a time zone ahead; such a plan is still judged
            # as of today below
            raise InvalidInput(
                f"{p.host}: the plan is dated {made}, after today ({today.isoformat()}): "
                f"refusing to apply; {REPLAN}"
            )
        try:
            derived = rederive(p, kb, rules, here)
        except NotDerived as e:
            edited.append(f"{p.host} (plans/{i}: no plan from its recorded inputs, {e.why})")
            continue
        diff = first_difference(_normal(p), _normal(derived))
        if diff is not None:
            edited.append(f"{p.host} (plans/{i}/{diff})")
            continue
        moved = _moved_since(p, kb, rules, here, today)
        if moved is not None:
            raise InvalidInput(
                f"stale plan, refusing to apply ({p.host}: made on {moved}, and the plan the "
                f"engine makes today differs: a support window it was judged on has moved): {REPLAN}"
            )
    if edited:
        raise InvalidInput(
            "the plan file is not what gpufix derives from its recorded inputs, refusing to apply "
            f"(differs at {', '.join(edited[:5])}{' ...' if len(edited) > 5 else ''}): "
            f"a plan file is a request, not a program; {REPLAN}"
        )


def _actions(plan: Plan) -> Any:
    doc = _normal(plan)
    return [doc.get(k) for k in ("strategy", "steps", "reboot_required", "interim")]


def _moved_since(
    plan: Plan, kb: KnowledgeBase, rules: Rules, where: str, today: date
) -> str | None:
    """The day the plan was made, when the plan made from its inputs today would act otherwise
    (another strategy, step, variable or interim); None when it would not, or it was made today."""
    made = (plan.inputs.get("constraints") or {}).get("plan_date")
    if not isinstance(made, str) or made == today.isoformat():
        return None
    try:
        now = rederive(plan, kb, rules, where, day=today)
    except NotDerived:
        return made  # no plan at all today: it would not act as the file says
    return made if _actions(now) != _actions(plan) else None


def _named_again(
    plans: list[Plan], given: str | None, where: str, key: str, texts: dict[str, str]
) -> None:
    """The operator's choice that no host fact checks (constraint `key`) runs only when they
    name it again: `texts` has the thing's name ("what"), the refusal ("refused", with {where}
    and {chosen}) and the option's complaint when the file chose nothing ("absent")."""
    named = sorted({str(v) for p in plans if (v := (p.inputs.get("constraints") or {}).get(key))})
    if len(named) > 1:
        raise InvalidInput(f"{where} names {len(named)} {texts['what']}s; `gpufix plan` names one")
    if named and given != named[0]:
        raise InvalidInput(texts["refused"].format(where=where, chosen=named[0]))
    if given is not None and not named:
        raise InvalidInput(texts["absent"].format(where=where))


def check_image(plans: list[Plan], image: str | None, where: str) -> None:
    """A plan that runs a container image (chosen with `plan --image`) is applied only when the
    operator names the same image again (`apply --image`): the image is the one input no fact
    of the host checks, and root pulls and runs it (docs/security.md)."""
    _named_again(plans, image, where, "container_image", {
        "what": "container image",
        "refused": "{where} runs the container image {chosen}, which no fact of the host checks: "
        "apply it only with --image naming the image you chose (a plan file cannot choose what "
        "root pulls)",
        "absent": "--image: {where} runs no container image",
    })  # fmt: skip


def check_torch(plans: list[Plan], torch: str | None, where: str) -> None:
    """A plan whose torch release the operator chose (`plan --torch`) is applied only when they
    name it again (`apply --torch`), as an image: the knowledge base holds old releases too (one
    with a known CVE fits a host as well), and root installs it (docs/security.md)."""
    _named_again(plans, torch, where, "torch", {
        "what": "torch release",
        "refused": "{where} installs torch {chosen}, a release chosen with --torch: apply it only "
        "with --torch naming the release you chose (a plan file cannot choose what root installs)",
        "absent": "--torch: {where} names no torch release",
    })  # fmt: skip
