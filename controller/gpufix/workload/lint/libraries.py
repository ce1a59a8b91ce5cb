"""The table of libraries that load torch or talk to CUDA (libraries.yaml), loaded and checked."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import yaml

KINDS = ("imports-torch", "cuda-runtime")
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


@dataclass(frozen=True)
class Library:
    module: str
    kind: str
    source: str
    note: str = ""

    @property
    def what(self) -> str:
        """How a finding describes the import."""
        if self.kind == "cuda-runtime":
            return "a library that initialises CUDA"
        return "torch" if self.module == "torch" else "a library that loads torch"


@dataclass(frozen=True)
class LibraryTable:
    by_module: dict[str, Library]

    def match(self, dotted: str) -> Library | None:
        """The row for a module name: the longest listed prefix (`numba.cuda.random` -> numba.cuda)."""
        parts = dotted.split(".")
        for n in range(len(parts), 0, -1):
            row = self.by_module.get(".".join(parts[:n]))
            if row is not None:
                return row
        return None

    @property
    def top_names(self) -> frozenset[str]:
        return frozenset(m.split(".")[0] for m in self.by_module)


def parse_table(text: str) -> LibraryTable:
    """Parse and check the YAML table; ValueError names the first bad row."""
    doc = yaml.safe_load(text)
    rows = doc.get("libraries") if isinstance(doc, dict) else None
    if not isinstance(rows, list) or not rows:
        raise ValueError("libraries.yaml: a non-empty `libraries` list is required")
    out: dict[str, Library] = {}
    for i, row in enumerate(rows):
        if not isinstance(row, dict) or set(row) - {"module", "kind", "source", "note"}:
            raise ValueError(f"libraries.yaml row {i}: keys are module, kind, source, note")
        module, kind, source = row.get("module"), row.get("kind"), row.get("source")
        if not isinstance(module, str) or not _MODULE.fullmatch(module):
            raise ValueError(f"libraries.yaml row {i}: bad module {module!r}")
        if kind not in KINDS:
            raise ValueError(f"libraries.yaml row {i}: kind must be one of {', '.join(KINDS)}")
        if not isinstance(source, str) or not source.startswith("https://"):
            raise ValueError(f"libraries.yaml row {i} ({module}): source must be an https URL")
        if module in out:
            raise ValueError(f"libraries.yaml row {i}: {module} listed twice")
        out[module] = Library(module, kind, source, str(row.get("note", "")))
    return LibraryTable(out)


@lru_cache(maxsize=1)
def load_table() -> LibraryTable:
    """The table shipped with gpufix."""
    text = resources.files(__package__).joinpath("libraries.yaml").read_text(encoding="utf-8")
    return parse_table(text)
