"""What a lint run produces: findings (with related locations and mechanical fixes) and results."""

from __future__ import annotations

from dataclasses import dataclass, replace

from gpufix.errors import EXIT_OK

from .rules import RULES_BY_ID

# Linters' convention (ruff, flake8): 1 when there are findings.
EXIT_FINDINGS = 1
FAILING_LEVELS = frozenset({"error", "warning"})


@dataclass(frozen=True)
class Related:
    path: str
    line: int
    col: int  # 1-based, in characters
    message: str


@dataclass(frozen=True)
class Replacement:
    """Replace [line:col, end_line:end_col) (1-based, characters) with `text`; empty = insert."""

    line: int
    col: int
    end_line: int
    end_col: int
    text: str


@dataclass(frozen=True)
class Fix:
    description: str
    path: str
    replacements: tuple[Replacement, ...]


@dataclass(frozen=True)
class LintFinding:
    rule: str
    path: str
    line: int
    col: int  # 1-based, in characters
    end_line: int
    end_col: int
    message: str
    related: tuple[Related, ...] = ()
    fix: Fix | None = None
    level: str = ""  # effective level after context and configuration; "" = the rule's default
    context: str = "code"  # code | test | example | library

    @property
    def effective_level(self) -> str:
        return self.level or RULES_BY_ID[self.rule].level

    def with_level(self, level: str, context: str) -> LintFinding:
        return replace(self, level=level, context=context)

    def to_dict(self) -> dict[str, object]:
        rule = RULES_BY_ID[self.rule]
        return {
            "rule": self.rule,
            "level": self.effective_level,
            "context": self.context,
            "path": self.path,
            "line": self.line,
            "col": self.col,
            "end_line": self.end_line,
            "end_col": self.end_col,
            "message": self.message,
            "related": [r.__dict__ for r in self.related],
            "fix": rule.fix,
            "doc": rule.doc,
        }


@dataclass(frozen=True)
class LintResult:
    files: int
    findings: tuple[LintFinding, ...]
    target_version: str = ""
    hidden: int = 0  # findings switched off by configuration (a rule set to "off")
    unchecked: int = 0  # files not checked: their context (tests, examples, library) is "off"
    skipped: tuple[str, ...] = ()  # "path: why" for files a directory held that could not be read

    @property
    def exit_code(self) -> int:
        """1 when a finding is an error or a warning; notes alone do not fail a run."""
        failing = any(f.effective_level in FAILING_LEVELS for f in self.findings)
        return EXIT_FINDINGS if failing else EXIT_OK
