"""The words (and the module-and-name references) of the files around a run's code that can call
a function by name: notebooks, shell launchers, Makefiles, configs (`_target_: net.init_net`),
packaging (`[project.scripts]`, `console_scripts`). Read as data: regular files only,
opened non-blocking (gpufix.inputs.read_prefix), a prefix of each, within a budget; when the
budget runs out, any name may be named there."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import TypeVar, cast

from gpufix.inputs import read_prefix

from .project import Project

SUFFIXES = (".ipynb", ".sh", ".bash", ".yaml", ".yml", ".json", ".cfg", ".toml", ".ini", ".mk")
NAMES = frozenset({"Makefile", "makefile", "GNUmakefile", "Dockerfile", "Justfile", "justfile"})
_SKIP = frozenset({"node_modules", "__pycache__", "site-packages", "venv", "env"})
PREFIX = 8 << 20  # bytes read of each file (a notebook's outputs can come before a call)
_BUDGET = 256 << 20  # bytes read in all
_MAX_FILES = 4000
_MAX_DIRS = 20000
_MAX_WORDS = 2_000_000
_WORD = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*")
# Two names joined by `.` or `:`, each pair of `a.b.c` (the look-ahead does not consume `b`);
# matches start only at a word's start, so a long run of word characters costs linear time.
_PAIR = re.compile(
    rb"(?<![A-Za-z0-9_])([A-Za-z_][A-Za-z0-9_]*)(?=[ \t]*[.:][ \t]*([A-Za-z_][A-Za-z0-9_]*))"
)
_FROM = re.compile(
    rb"(?<![A-Za-z0-9_])from[ \t]+(?:[A-Za-z0-9_]+\.)*([A-Za-z_][A-Za-z0-9_]*)[ \t]+import"
    rb"[ \t]+([^\n;]*)"
)
_T = TypeVar("_T")


def side_words(project: Project) -> frozenset[bytes] | None:
    """Every identifier-like word of those files under the run's top directory, hidden and
    environment directories left out (cached); None when a limit was reached."""
    if "side-words" not in project.cache:
        project.cache["side-words"] = _gather(project, _words_of)
    return cast("frozenset[bytes] | None", project.cache["side-words"])


def side_refs(project: Project) -> frozenset[tuple[bytes, bytes]] | None:
    """(module, name) pairs those files name a function by: `train:main` (an entry point),
    `train.main` (a dotted target, `_target_: src.train.main`, or a call in a notebook) and
    `from src.train import main`; the module is the last part of its dotted name. Cached; None
    when a limit was reached."""
    if "side-refs" not in project.cache:
        project.cache["side-refs"] = _gather(project, _refs_of)
    return cast("frozenset[tuple[bytes, bytes]] | None", project.cache["side-refs"])


def _words_of(data: bytes) -> list[bytes]:
    return _WORD.findall(data)


def _refs_of(data: bytes) -> list[tuple[bytes, bytes]]:
    pairs: list[tuple[bytes, bytes]] = _PAIR.findall(data)
    for module, names in _FROM.findall(data):
        pairs.extend((module, n) for n in _WORD.findall(names))
    return pairs


def _top(project: Project) -> str | None:
    dirs = {os.path.dirname(os.path.abspath(f.path)) for f in project.files}
    return os.path.commonpath(sorted(dirs)) if dirs else None


def _gather(project: Project, found_in: Callable[[bytes], list[_T]]) -> frozenset[_T] | None:
    top = _top(project)
    if top is None:
        return frozenset()
    found: set[_T] = set()
    budget, files, dirs = _BUDGET, 0, 0
    for here, subdirs, names in os.walk(top):  # links to directories are not followed
        dirs += 1
        subdirs[:] = sorted(d for d in subdirs if not d.startswith(".") and d not in _SKIP)
        for name in sorted(names):
            if not (name.endswith(SUFFIXES) or name in NAMES):
                continue
            files += 1
            data = read_prefix(os.path.join(here, name), min(PREFIX, budget))
            budget -= len(data or b"")
            found.update(found_in(data or b""))
            if budget <= 0 or files > _MAX_FILES or len(found) > _MAX_WORDS:
                return None
        if dirs > _MAX_DIRS:
            return None
    return frozenset(found)
