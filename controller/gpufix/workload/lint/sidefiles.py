"""The words of the files around a run's code that can call a function by name: notebooks,
shell and Slurm launchers, Makefiles, configs (`_target_: net.init_net`), packaging
(`[project.scripts]`, `console_scripts`, an egg-info's `entry_points.txt`). Read as data:
regular files only, opened non-blocking (gpufix.inputs.read_prefix), a prefix of each, within a
budget; when the budget runs out, any name may be named there."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import cast

from gpufix.inputs import read_prefix

from .project import Project

# Slurm batch scripts (.sbatch, .slurm) launch training as shell scripts do; entry_points.txt is
# the installed form of `console_scripts` (packaging.python.org, "Entry points specification").
SUFFIXES = (
    *(".ipynb", ".sh", ".bash", ".yaml", ".yml", ".json", ".cfg", ".toml", ".ini", ".mk"),
    *(".sbatch", ".slurm"),
)
NAMES = frozenset(
    {
        "Makefile",
        "makefile",
        "GNUmakefile",
        "Dockerfile",
        "Justfile",
        "justfile",
        "entry_points.txt",
    }
)
_SKIP = frozenset({"node_modules", "__pycache__", "site-packages", "venv", "env"})
PREFIX = 8 << 20  # bytes read of each file (a notebook's outputs can come before a call)
_BUDGET = 256 << 20  # bytes read in all
_MAX_FILES = 4000
_MAX_DIRS = 20000
_MAX_WORDS = 2_000_000
_WORD = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*")


def side_words(project: Project) -> frozenset[bytes] | None:
    """Every identifier-like word of those files under the run's top directory, hidden and
    environment directories left out (cached); None when a limit was reached."""
    if "side-words" not in project.cache:
        project.cache["side-words"] = _gather_words(project)
    return cast("frozenset[bytes] | None", project.cache["side-words"])


def side_index(project: Project) -> dict[bytes, frozenset[int]] | None:
    """Which of those files holds each word (word -> file numbers), to ask whether one file
    names two things together (a module and a function); cached; None when a limit was
    reached."""
    if "side-index" not in project.cache:
        project.cache["side-index"] = _gather_index(project)
    return cast("dict[bytes, frozenset[int]] | None", project.cache["side-index"])


def _gather_index(project: Project) -> dict[bytes, frozenset[int]] | None:
    found: dict[bytes, set[int]] = {}
    entries = 0
    for number, data in enumerate(_side_files(project)):
        if data is None:
            return None
        for word in set(_WORD.findall(data)):
            found.setdefault(word, set()).add(number)
            entries += 1
        if entries > _MAX_WORDS:
            return None
    return {w: frozenset(n) for w, n in found.items()}


def _top(project: Project) -> str | None:
    dirs = {os.path.dirname(os.path.abspath(f.path)) for f in project.files}
    return os.path.commonpath(sorted(dirs)) if dirs else None


def _gather_words(project: Project) -> frozenset[bytes] | None:
    found: set[bytes] = set()
    for data in _side_files(project):
        if data is None:
            return None
        found.update(_WORD.findall(data))
        if len(found) > _MAX_WORDS:
            return None
    return frozenset(found)


def _side_files(project: Project) -> Iterator[bytes | None]:
    """The prefix of each side file under the run's top directory, in a fixed order; a final
    None when a limit was reached (too many files, directories or bytes)."""
    top = _top(project)
    if top is None:
        return
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
            yield data or b""
            if budget <= 0 or files > _MAX_FILES:
                yield None
                return
        if dirs > _MAX_DIRS:
            yield None
            return
