"""The checks, one module per idea; each reads the run's files and reports through a Reporter."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from ..libraries import LibraryTable
from ..project import Project, SourceFile
from ..report import Reporter


@dataclass(frozen=True)
class CheckContext:
    project: Project
    table: LibraryTable
    reporter: Reporter
    checked: tuple[SourceFile, ...]  # parsed files whose findings can be shown

    # byte string -> ids of the checked files that hold it: each scanned for once a run
    holding: dict[bytes, frozenset[int]] = field(default_factory=dict, compare=False, repr=False)

    def with_any(self, triggers: tuple[bytes, ...]) -> list[SourceFile]:
        """Checked files that contain one of these byte strings (a fast filter before walking)."""
        ids = frozenset().union(*(self._holding(t) for t in _fewest(triggers)))
        return [sf for sf in self.checked if id(sf) in ids]

    def prescan(self, needles: tuple[bytes, ...]) -> None:
        """Which checked files hold each of the checks' byte strings, file by file (each file
        is read once while it is in the CPU cache, not once per string): bench/lint_bench.py."""
        order = sorted(set(needles) - set(self.holding), key=len)
        parts = {n: [p for p in order if p != n and p in n] for n in order}
        found: dict[bytes, set[int]] = {n: set() for n in order}
        for sf in self.checked:
            data, here = sf.data, set()
            for n in order:
                if all(p in here for p in parts[n]) and n in data:
                    here.add(n)
                    found[n].add(id(sf))
        self.holding.update((n, frozenset(ids)) for n, ids in found.items())

    def _holding(self, needle: bytes) -> frozenset[int]:
        found = self.holding.get(needle)
        if found is None:
            pool: tuple[SourceFile, ...] | list[SourceFile] = self.checked
            # a file holding `needle` holds every part of it: scan only where a part was found
            parts = [ids for part, ids in self.holding.items() if part in needle]
            if parts:
                within = min(parts, key=len)
                pool = [sf for sf in self.checked if id(sf) in within]
            found = frozenset(id(sf) for sf in pool if needle in sf.data)
            self.holding[needle] = found
        return found

    def matching(self, quick: tuple[bytes, ...], pattern: re.Pattern[bytes]) -> list[SourceFile]:
        """Checked files with one of the `quick` byte strings in which the pattern occurs."""
        return [sf for sf in self.with_any(quick) if pattern.search(sf.data)]


@functools.cache
def _fewest(triggers: tuple[bytes, ...]) -> tuple[bytes, ...]:
    """The same filter with fewer scans: a trigger that holds another one adds nothing."""
    unique = tuple(dict.fromkeys(triggers))
    return tuple(t for t in unique if not any(o != t and o in t for o in unique))


@dataclass(frozen=True)
class Check:
    rules: tuple[str, ...]
    run: Callable[[CheckContext], None]
    triggers: tuple[bytes, ...] = ()  # the byte strings its first filter asks for
