"""Output: text lines, the gpufix-lint JSON document, and SARIF 2.1.0 (with `fixes`)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

from gpufix import __version__
from gpufix.inputs import printable

from .model import LintFinding, LintResult, Related
from .rules import RULE_INDEX, RULES

FORMATS = ("text", "json", "sarif")
SARIF_SCHEMA = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)


def format_text(result: LintResult) -> str:
    return "".join(
        f"{printable(f.path)}:{f.line}:{f.col}: {f.rule} {printable(f.message)}"
        + (f" [{f.effective_level}, {f.context}]" if f.context != "code" else "")
        + "\n"
        for f in result.findings
    )


def summary(result: LintResult) -> str:
    n = len(result.findings)
    out = f"{n} finding{'' if n == 1 else 's'} in {result.files} file(s)"
    if result.unchecked:
        out += (
            f"; {result.unchecked} file(s) in tests/examples/library not checked (--all-contexts)"
        )
    if result.hidden:
        out += f"; {result.hidden} finding(s) off by configuration"
    if result.skipped:
        out += (
            f"; {len(result.skipped)} file(s) skipped, not readable as source"
            f" ({printable(result.skipped[0])})"
        )
    return out


def to_json(result: LintResult) -> dict[str, object]:
    counts: dict[str, int] = {}
    for f in result.findings:
        counts[f.rule] = counts.get(f.rule, 0) + 1
    return {
        "format": "gpufix-lint",
        "version": 2,
        "files_checked": result.files,
        "target_version": result.target_version,
        "counts": counts,
        "unchecked_files": result.unchecked,
        "hidden": result.hidden,
        "skipped_files": list(result.skipped),
        "findings": [f.to_dict() for f in result.findings],
    }


def _uri(path: str) -> str:
    p = Path(path)
    return p.as_uri() if p.is_absolute() else quote(p.as_posix())


def _region(line: int, col: int, end_line: int, end_col: int) -> dict[str, int]:
    return {"startLine": line, "startColumn": col, "endLine": end_line, "endColumn": end_col}


def _physical(path: str, region: dict[str, int]) -> dict[str, object]:
    return {"artifactLocation": {"uri": _uri(path)}, "region": region}


def _related(related: tuple[Related, ...]) -> list[dict[str, object]]:
    return [
        {
            "id": i,
            "message": {"text": r.message},
            "physicalLocation": _physical(r.path, _region(r.line, r.col, r.line, r.col)),
        }
        for i, r in enumerate(related, start=1)
    ]


def _result(f: LintFinding) -> dict[str, object]:
    entry: dict[str, object] = {
        "ruleId": f.rule,
        "ruleIndex": RULE_INDEX[f.rule],
        "level": f.effective_level,
        "message": {"text": f.message},
        "locations": [
            {"physicalLocation": _physical(f.path, _region(f.line, f.col, f.end_line, f.end_col))}
        ],
        "properties": {"context": f.context},
    }
    if f.related:
        entry["relatedLocations"] = _related(f.related)
    if f.fix is not None:
        entry["fixes"] = [
            {
                "description": {"text": f.fix.description},
                "artifactChanges": [
                    {
                        "artifactLocation": {"uri": _uri(f.fix.path)},
                        "replacements": [
                            {
                                "deletedRegion": _region(r.line, r.col, r.end_line, r.end_col),
                                "insertedContent": {"text": r.text},
                            }
                            for r in f.fix.replacements
                        ],
                    }
                ],
            }
        ]
    return entry


def to_sarif(result: LintResult) -> dict[str, object]:
    """A SARIF 2.1.0 log with one run."""
    rules = [
        {
            "id": r.id,
            "name": r.name,
            "shortDescription": {"text": r.summary},
            "fullDescription": {"text": r.doc},
            "help": {"text": f"{r.doc} Fix: {r.fix} Sources: {' '.join(r.sources)}"},
            "helpUri": r.sources[0],
            "defaultConfiguration": {"level": r.level},
        }
        for r in RULES
    ]
    driver = {"name": "gpufix-lint", "version": __version__, "rules": rules}
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": driver},
                "columnKind": "unicodeCodePoints",
                "results": [_result(f) for f in result.findings],
            }
        ],
    }
