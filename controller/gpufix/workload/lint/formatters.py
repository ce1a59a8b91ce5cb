"""Output: text lines, the gpufix-lint JSON document, and SARIF 2.1.0 (with `fixes`)."""

from __future__ import annotations

import hashlib
import os
import re
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


# SARIF's name for the checkout's root: GitHub reads a relative uri from the repository's root,
# and a run from a subdirectory must not shift every path (SARIF 2.1.0, 3.4.4 and 3.14.14).
SRCROOT = "%SRCROOT%"


class _Paths:
    """Artifact locations relative to the source root (`uriBaseId`), or file:// URIs for a file
    outside it; and each result's fingerprint from its line's text."""

    def __init__(self, root: Path | None) -> None:
        self.root = root
        self._lines: dict[str, list[str]] = {}
        self._seen: dict[str, int] = {}

    def location(self, path: str) -> dict[str, str]:
        # the directory resolved as the root is (a run through a linked checkout names the
        # same file the same way), the file's own name kept
        absolute = os.path.abspath(path)
        full = Path(os.path.realpath(os.path.dirname(absolute))) / os.path.basename(absolute)
        if self.root is not None:
            try:
                rel = full.relative_to(self.root)
            except ValueError:
                return {"uri": full.as_uri()}
            return {"uri": quote(rel.as_posix()), "uriBaseId": SRCROOT}
        p = Path(path)
        return {"uri": p.as_uri() if p.is_absolute() else quote(p.as_posix())}

    def fingerprint(self, f: LintFinding) -> str:
        """The rule, the file and the finding's line with its spaces collapsed, and how many
        such lines came before: stable when lines are added above it (as GitHub's own
        primaryLocationLineHash), so an alert is not closed and opened again."""
        lines = self._lines.get(f.path)
        if lines is None:
            try:
                text = Path(f.path).read_text(encoding="utf-8", errors="replace")
                lines = _LINE_END.split(text)  # as Python numbers lines (not at \f or U+2028)
            except OSError:
                lines = []
            self._lines[f.path] = lines
        text = " ".join(lines[f.line - 1].split()) if 0 < f.line <= len(lines) else ""
        key = "\0".join((f.rule, self.location(f.path)["uri"], text))
        n = self._seen[key] = self._seen.get(key, 0) + 1
        return hashlib.sha256(f"{key}\0{n}".encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _region(line: int, col: int, end_line: int, end_col: int) -> dict[str, int]:
    return {"startLine": line, "startColumn": col, "endLine": end_line, "endColumn": end_col}


def _physical(paths: _Paths, path: str, region: dict[str, int]) -> dict[str, object]:
    return {"artifactLocation": paths.location(path), "region": region}


_LINE_END = re.compile(r"\r\n|\r|\n")


def _related(paths: _Paths, related: tuple[Related, ...]) -> list[dict[str, object]]:
    """A related place is a line (SARIF 3.30.2: a region whose start and end column are equal
    is an empty insertion point, which nothing can show)."""
    return [
        {
            "id": i,
            "message": {"text": _escaped(r.message)},
            "physicalLocation": _physical(paths, r.path, {"startLine": r.line}),
        }
        for i, r in enumerate(related, start=1)
    ]


def _message(f: LintFinding) -> str:
    """GitHub links a related location only where the message embeds it: `[text](id)`
    (SARIF 3.11.6); brackets of the finding's own text are escaped there so that none reads
    as a link."""
    text = _escaped(f.message)
    if f.related:
        links = (f"[{_escaped(r.path)}:{r.line}]({i})" for i, r in enumerate(f.related, start=1))
        text += " (see " + ", ".join(links) + ")"
    return text


def _escaped(text: str) -> str:
    return text.replace("[", "\\[").replace("]", "\\]")


def _result(paths: _Paths, f: LintFinding) -> dict[str, object]:
    region = _region(f.line, f.col, f.end_line, f.end_col)
    entry: dict[str, object] = {
        "ruleId": f.rule,
        "ruleIndex": RULE_INDEX[f.rule],
        "level": f.effective_level,
        "message": {"text": _message(f)},
        "locations": [{"physicalLocation": _physical(paths, f.path, region)}],
        "partialFingerprints": {"gpufixLineHash/v1": paths.fingerprint(f)},
        "properties": {"context": f.context},
    }
    if f.related:
        entry["relatedLocations"] = _related(paths, f.related)
    if f.fix is not None:
        entry["fixes"] = [
            {
                "description": {"text": f.fix.description},
                "artifactChanges": [
                    {
                        "artifactLocation": paths.location(f.fix.path),
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


def to_sarif(result: LintResult, root: Path | None = None) -> dict[str, object]:
    """A SARIF 2.1.0 log with one run; paths relative to `root` (the checkout) when given."""
    paths = _Paths(root.resolve() if root is not None else None)
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
    run: dict[str, object] = {"tool": {"driver": driver}}
    if paths.root is not None:
        run["originalUriBaseIds"] = {SRCROOT: {"uri": paths.root.as_uri().rstrip("/") + "/"}}
    # A file the run could not read is said here (SARIF 3.20.21: a consumer must not take the
    # results of such a run for all there is), not only in the text summary.
    run["invocations"] = [
        {
            "executionSuccessful": True,
            "toolExecutionNotifications": [
                {"level": "warning", "message": {"text": f"not checked: {printable(why)}"}}
                for why in result.skipped
            ],
        }
    ]
    run["columnKind"] = "unicodeCodePoints"
    run["results"] = [_result(paths, f) for f in result.findings]
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}
