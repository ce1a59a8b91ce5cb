"""From what the checks found to what is shown: per-rule levels, context policy and `# noqa`."""

from __future__ import annotations

import re

from .config import LintConfig
from .model import LintFinding
from .rules import LEVELS, RULES_BY_ID

_NOQA = re.compile(
    r"#\s*noqa(?![\w-])(?P<colon>\s*:\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*)?)?", re.I
)
_CONTEXT_KEY = {"test": "tests", "example": "examples", "library": "library"}


def context_policy(context: str, config: LintConfig) -> str:
    key = _CONTEXT_KEY.get(context)
    return config.contexts.get(key, "as-is") if key else "as-is"


def level_for(finding: LintFinding, config: LintConfig) -> str:
    """The level to show a finding at; "off" when it is not shown."""
    level = config.severity.get(finding.rule, RULES_BY_ID[finding.rule].level)
    policy = context_policy(finding.context, config)
    if level == "off" or policy == "off":
        return "off"
    if policy == "note" and LEVELS.index(level) < LEVELS.index("note"):
        return "note"
    return level


def suppressed_by_noqa(finding: LintFinding, line_text: str) -> bool:
    """`# noqa` silences every rule on the line; `# noqa: GPF001, GPF003` those rules. Every
    `noqa` of the comment counts (`# nosec # noqa: GPF003 # noqa: GPF001`); one whose codes
    cannot be read (`# noqa: GPF-001`) silences nothing, rather than everything."""
    for m in _NOQA.finditer(line_text):
        if m.group("colon") is None:
            return True
        codes = m.group("codes")
        if codes and finding.rule in {c.upper() for c in re.split(r"[\s,]+", codes) if c}:
            return True
    return False
