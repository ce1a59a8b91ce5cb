"""Run the lint: read and parse the files, run every check over them as one project, then apply
levels, context policy and `# noqa`."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path

from gpufix import inputs
from gpufix.errors import InvalidInput

from .checks import CheckContext
from .checks.registry import CHECKS
from .config import LintConfig, load_config
from .discover import classify, iter_python_files, matches, vendored
from .libraries import load_table
from .model import LintFinding, LintResult
from .parse import parse_file
from .project import Project, SourceFile
from .report import Reporter
from .severity import context_policy, level_for, suppressed_by_noqa
from .unused import PACKAGING


def _fmt_target(config: LintConfig) -> str:
    if config.target is None:
        return "unknown"
    return f"{config.target[0]}.{config.target[1]} ({config.target_origin})"


def lint_files(
    files: Sequence[tuple[str, str, bytes]], config: LintConfig, whole: bool = False
) -> LintResult:
    """Lint (path, root-relative path, contents) triples as one project; `whole`: they are all
    of the project's Python files (lint was given directories), so a function none of them uses
    is used by nothing."""
    sources: list[SourceFile] = []
    problems: list[LintFinding] = []
    frozen = gc.isenabled()
    # Syntax trees hold no reference cycles: the collector is off while they are made (it
    # walked the trees kept so far, and each new tree, every few hundred nodes) and they are
    # frozen out of its sight while the checks run.
    gc.disable()
    try:
        for path, rel, data in files:
            tree, problem = parse_file(data, path, config.target)
            context = "library" if vendored(path, rel) else classify(rel)
            sf = SourceFile(path, rel, context, data, tree)
            sources.append(sf)
            if problem is not None:
                problems.append(replace(problem, context=sf.context))
        if frozen:
            gc.freeze()
            gc.enable()
        return _check(sources, problems, config, whole)
    finally:
        if frozen:
            gc.unfreeze()
            gc.enable()


def _noqa_on(sf: SourceFile, line: int) -> bool:
    """A cheap test first: the tokenizer runs only for a line that holds the word."""
    return 0 < line <= len(sf.lines) and "noqa" in sf.lines[line - 1].lower()


def _check(
    sources: list[SourceFile], problems: list[LintFinding], config: LintConfig, whole: bool
) -> LintResult:
    project = Project(sources, whole)
    reporter = Reporter()
    checked = tuple(sf for sf in project.parsed() if context_policy(sf.context, config) != "off")
    ctx = CheckContext(project, load_table(), reporter, checked)
    ctx.prescan(tuple(t for check in CHECKS for t in check.triggers))
    for check in CHECKS:
        check.run(ctx)
    by_path = {sf.path: sf for sf in sources}
    shown: list[LintFinding] = []
    hidden = 0
    for f in [*problems, *reporter.findings()]:
        level = level_for(f, config)
        sf = by_path[f.path]
        if _noqa_on(sf, f.line) and suppressed_by_noqa(f, sf.comments().get(f.line, "")):
            continue
        if level == "off":
            hidden += 1
            continue
        shown.append(f.with_level(level, f.context))
    shown.sort(key=lambda f: (f.path, f.line, f.col, f.rule))
    unchecked = sum(context_policy(sf.context, config) == "off" for sf in sources)
    return LintResult(len(sources), tuple(shown), _fmt_target(config), hidden, unchecked)


def lint_paths(
    paths: Sequence[str], config: LintConfig | None = None, config_file: str | None = None
) -> LintResult:
    """Lint files and directories; raises InvalidInput for a path that does not exist."""
    paths = list(paths) or ["."]
    if "" in paths:
        raise InvalidInput("an empty path (an unset shell variable?)")
    missing = [p for p in paths if not Path(p).exists()]
    if missing:
        if os.path.lexists(missing[0]):
            raise InvalidInput(
                f"{missing[0]}: a symbolic link that leads nowhere (dangling or a loop)"
            )
        raise InvalidInput(f"no such file or directory: {missing[0]}")
    config = config if config is not None else load_config(paths, config_file)
    named = {os.path.realpath(p) for p in paths if not os.path.isdir(p)}
    files, skipped, seen = [], [], []
    unreadable: list[str] = []
    for path, rel in once(iter_python_files(paths, config, unreadable)):
        seen.append(rel)
        # the input layer: a regular file of bounded size (not a FIFO or /dev/zero behind a link)
        try:
            files.append((path, rel, inputs.read_bytes(path, "source")))
        except InvalidInput as exc:
            if os.path.realpath(path) in named:  # named on the command line: bad input
                raise
            # one stray file a directory holds (an editor's lock link, a FIFO, a huge
            # generated file) is reported and passed over, not the end of the run
            skipped.append(f"{path}: {str(exc).removeprefix('gpufix: error: ')}")
    skipped += unreadable
    _check_include(paths, config, seen)
    if not seen:
        _nothing_found(paths, config)
    result = lint_files(files, config, whole=all(_whole_project(p) for p in paths))
    return replace(result, skipped=tuple(skipped)) if skipped else result


def once(found: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """Each file once, however often it was reached (`lint . src`, `./a.py a.py`, a link to a
    file of the run): read twice, every finding would be reported twice. The file's own path
    wins over a symbolic link's (a result at a link cannot be shown on GitHub), else the first
    path given. (A file named on the command line stays bad input when it cannot be read,
    whichever path reached it first: the caller compares real paths with `named`.)"""
    by_real: dict[str, tuple[str, str]] = {}
    for path, rel in found:
        real = os.path.realpath(path)
        kept = by_real.get(real)
        if kept is None or (os.path.islink(kept[0]) and not os.path.islink(path)):
            by_real[real] = (path, rel)
    return list(by_real.values())


def _check_include(paths: Sequence[str], config: LintConfig, found: list[str]) -> None:
    """An `include` pattern that matches no file of a run over the whole project is a typo
    that would turn the lint off for good (a green CI that checks nothing)."""
    if not config.include:
        return
    root = os.path.abspath(config.root)
    if not any(os.path.isdir(p) and os.path.abspath(p) == root for p in paths):
        return  # a run over part of the project: another part may hold what it names
    for pattern in config.include:
        if not any(matches(rel, pattern) for rel in found):
            where = f"{config.source} [tool.gpufix.lint]" if config.source else "include"
            raise InvalidInput(
                f"{where}: include pattern {pattern!r} matches no .py file under {root}"
            )


def _nothing_found(paths: Sequence[str], config: LintConfig) -> None:
    """Directories that gave no file to check: a wrong directory, or an exclude that covers
    everything (`exclude = ["**"]`): a green CI that checks nothing. mypy also refuses this."""
    dirs = [p for p in paths if os.path.isdir(p)]
    if not dirs:
        return
    bare = replace(config, include=(), exclude=())
    total = sum(1 for _ in iter_python_files(dirs, bare))
    if total == 0:
        raise InvalidInput(f"no .py file under {', '.join(dirs)}: nothing to lint")
    where = f"{config.source} [tool.gpufix.lint]" if config.source else "include/exclude"
    raise InvalidInput(
        f"{where}: include/exclude leave none of the {total} .py file(s) under "
        f"{', '.join(dirs)} to check"
    )


def _whole_project(path: str) -> bool:
    """A directory that is a whole project: it holds `.git`, or its parent holds neither a
    Python file nor packaging (`gpufix lint repo/src` lints part of one)."""
    p = Path(path).resolve()
    if not p.is_dir():
        return False
    if (p / ".git").exists() or p.parent == p:
        return True
    try:
        with os.scandir(p.parent) as entries:
            for n, entry in enumerate(entries):
                if n > 10_000 or entry.name.endswith(".py") or entry.name in PACKAGING:
                    return False
    except OSError:
        return False
    return True


def lint_source(
    source: str | bytes, path: str = "<string>", config: LintConfig | None = None
) -> list[LintFinding]:
    """Findings for one file's contents, sorted by position (a one-file project)."""
    data = source.encode("utf-8", "surrogatepass") if isinstance(source, str) else source
    config = config if config is not None else LintConfig(Path("."))
    return list(lint_files([(path, path, data)], config).findings)
