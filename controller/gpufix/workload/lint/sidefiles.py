"""The words of the files around a run's code that can call a function by name: notebooks, shell
launchers, Makefiles, configs (`_target_: net.init_net`). Read as data: regular files only,
opened non-blocking (gpufix.inputs.read_prefix), a prefix of each, within a budget; when the
budget runs out, any name may be named there."""

from __future__ import annotations

import os
import re
from typing import cast

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


def side_words(project: Project) -> frozenset[bytes] | None:
    """Every identifier-like word of those files under the run's top directory, hidden and
    environment directories left out (cached); None when a limit was reached."""
    if "side-words" not in project.cache:
        project.cache["side-words"] = _gather(project)
    return cast("frozenset[bytes] | None", project.cache["side-words"])


def _top(project: Project) -> str | None:
    dirs = {os.path.dirname(os.path.abspath(f.path)) for f in project.files}
    return os.path.commonpath(sorted(dirs)) if dirs else None


def _gather(project: Project) -> frozenset[bytes] | None:
    top = _top(project)
    if top is None:
        return frozenset()
    words: set[bytes] = set()
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
            words.update(_WORD.findall(data or b""))
            if budget <= 0 or files > _MAX_FILES or len(words) > _MAX_WORDS:
                return None
        if dirs > _MAX_DIRS:
            return None
    return frozenset(words)
