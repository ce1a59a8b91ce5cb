"""`gpufix lint`: static checks for self-inflicted multi-GPU start-up mistakes in training code.

Laid out as flake8 is: `rules` (what is reported), `discover` and `config` (which files, at
which level), `parse` (the target Python's grammar), the checker (`names` table, `flow` walker,
`calls` graph, `checks/`), and `formatters` (text, JSON, SARIF). Code is read, never run or
imported; a check reports only what it is certain of.
"""

from __future__ import annotations

from .api import lint_files, lint_paths, lint_source
from .command import main_lint
from .formatters import format_text, to_json, to_sarif
from .model import EXIT_FINDINGS, LintFinding, LintResult
from .rules import RULES, RULES_BY_ID, LintRule

__all__ = [
    "EXIT_FINDINGS",
    "RULES",
    "RULES_BY_ID",
    "LintFinding",
    "LintResult",
    "LintRule",
    "format_text",
    "lint_files",
    "lint_paths",
    "lint_source",
    "main_lint",
    "to_json",
    "to_sarif",
]
