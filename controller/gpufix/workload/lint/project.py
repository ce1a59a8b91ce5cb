"""The files one lint run is given, as modules: names, import resolution, definitions.

Module names follow Python's rules: a directory is a package when the run includes its
`__init__.py`; a file outside a package is a top-level module named for its stem (a script's
directory is on sys.path). Imports that name no file of the run are external libraries.
"""

from __future__ import annotations

import ast
import io
import os
import re
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import cast

from .names import NameTable, absolute_module, top_level_defs

LINE_BREAK = re.compile(r"\r\n|\r|\n")  # Python's line ends (the tokenizer's)

# Import statements, read from the bytes (one scan per file) to index who imports what.
_IMPORT_LINE = re.compile(
    rb"^[ \t]*(?:from[ \t]+(\.*)([\w.]*)[ \t]+import[ \t]*\(?([\w, \t]*)|import[ \t]+([\w., \t]+))",
    re.M,
)


@dataclass(eq=False)  # one object per file: compared by identity
class SourceFile:
    path: str  # as reported
    rel: str  # relative to the project root, POSIX separators
    context: str  # code | test | example | library
    data: bytes
    tree: ast.Module | None
    module: str = ""
    package: str = ""
    _text: str | None = field(default=None, repr=False)
    _names: NameTable | None = field(default=None, repr=False)
    _lines: list[str] | None = field(default=None, repr=False)
    cache: dict[str, object] = field(default_factory=dict, repr=False)  # per-run facts, by name
    _defs: dict[str, ast.stmt] | None = field(default=None, repr=False)

    @property
    def text(self) -> str:
        if self._text is None:
            # the file's own encoding (a coding cookie, a BOM) as Python reads it, so columns
            # computed from ast's UTF-8 offsets land on the right characters
            try:
                encoding, _ = tokenize.detect_encoding(io.BytesIO(self.data).readline)
            except (SyntaxError, LookupError):
                encoding = "utf-8"
            self._text = self.data.decode(encoding, "replace")
        return self._text

    @property
    def lines(self) -> list[str]:
        """The lines as Python counts them (`\\r\\n`, `\\r`, `\\n`; not str.splitlines's form feed
        or U+2028), so line numbers match ast's."""
        if self._lines is None:
            text = self.text
            lines = LINE_BREAK.split(text) if "\r" in text else text.split("\n")
            if lines[-1] == "":
                lines.pop()
            self._lines = lines
        return self._lines

    def comments(self) -> dict[int, str]:
        """Each line's comment, from the tokenizer (a `#` inside a string is not one)."""
        cached = self.cache.get("comments")
        if cached is not None:
            return cast(dict[int, str], cached)
        found: dict[int, str] = {}
        try:
            tokens = tokenize.generate_tokens(io.StringIO(self.text, newline=None).readline)
            for tok in tokens:
                if tok.type == tokenize.COMMENT:
                    found[tok.start[0]] = tok.string
        except (tokenize.TokenError, SyntaxError, ValueError):
            found = dict(enumerate(self.lines, 1))  # fall back: the raw lines
        self.cache["comments"] = found
        return found

    def col(self, line: int, col_offset: int) -> int:
        """ast column offsets count UTF-8 bytes; report characters, 1-based."""
        if 0 < line <= len(self.lines):
            text = self.lines[line - 1]
            return len(text.encode("utf-8")[:col_offset].decode("utf-8", "replace")) + 1
        return col_offset + 1

    @property
    def names(self) -> NameTable:
        if self._names is None:
            assert self.tree is not None
            self._names = NameTable(self.tree, self.module, self.package)
        return self._names

    @property
    def defs(self) -> dict[str, ast.stmt]:
        """Module-level functions and classes by name."""
        if self._defs is None:
            body = self.tree.body if self.tree is not None else []
            self._defs = {d.name: d for d in top_level_defs(body)}  # type: ignore[attr-defined]
        return self._defs

    def path_abs(self) -> str:
        cached = self.cache.get("abs")
        if cached is None:
            cached = self.cache["abs"] = os.path.abspath(self.path)
        return str(cached)

    def mentions(self, word: str) -> bool:
        return word.encode() in self.data


def _module_names(paths: list[str]) -> dict[str, tuple[str, str]]:
    """path -> (dotted module name, package) for every file, packages found by __init__.py."""
    files = {os.path.normpath(os.path.abspath(p)): p for p in paths}
    packages = {os.path.dirname(a) for a in files if os.path.basename(a) == "__init__.py"}
    out = {}
    for absolute, original in files.items():
        parts = []
        d = os.path.dirname(absolute)
        stem = os.path.splitext(os.path.basename(absolute))[0]
        while d in packages:
            parts.append(os.path.basename(d))
            parent = os.path.dirname(d)
            if parent == d:
                break
            d = parent
        parts.reverse()
        dotted = ".".join(parts if stem == "__init__" else [*parts, stem])
        out[original] = (dotted, ".".join(parts))
    return out


class Project:
    def __init__(self, files: list[SourceFile], whole: bool = False) -> None:
        self.files = files
        self.whole = whole  # all of the project's Python files (directories were linted)
        self.cache: dict[str, object] = {}  # per-run facts about the whole project, by name
        self._importers: dict[str, list[SourceFile]] | None = None
        self._found: dict[tuple[str, str], SourceFile | None] = {}
        # Every directory and file name of the run: an import whose first name is not one of
        # these cannot be a file of the run.
        self._names = {
            part.removesuffix(".py")
            for f in files
            for part in os.path.normpath(os.path.abspath(f.path)).split(os.sep)
        }
        names = _module_names([f.path for f in files])
        self.by_module: dict[str, list[SourceFile]] = {}
        self.by_abspath: dict[str, SourceFile] = {}
        for f in files:
            f.module, f.package = names[f.path]
            if f.tree is not None:
                self.by_module.setdefault(f.module, []).append(f)
                self.by_abspath[os.path.normpath(os.path.abspath(f.path))] = f

    def holding(self, needle: bytes) -> list[SourceFile]:
        """The parsed files whose bytes hold `needle`, scanned for once a run."""
        key = "holding:" + needle.decode("utf-8", "replace")
        cached = self.cache.get(key)
        if cached is None:
            cached = self.cache[key] = [f for f in self.parsed() if needle in f.data]
        return cached  # type: ignore[return-value]

    def has_name(self, name: str) -> bool:
        """A directory or file (without .py) of the run has this name."""
        return name in self._names

    def import_index(self) -> dict[str, list[SourceFile]]:
        """Each module name the run's import statements name (and its parents) -> importers."""
        if self._importers is None:
            self._importers = {}
            for f in self.parsed():
                for name in _imported_names(f):
                    parts = name.split(".")
                    for n in range(1, len(parts) + 1):
                        self._importers.setdefault(".".join(parts[:n]), []).append(f)
        return self._importers

    def importers_of(self, module: str) -> list[SourceFile]:
        """Files with an import statement naming `module` or a module below it."""
        seen: dict[int, SourceFile] = {}
        for f in self.import_index().get(module, []):
            seen.setdefault(id(f), f)
        return list(seen.values())

    def importers_of_file(self, sf: SourceFile) -> list[SourceFile]:
        """Files whose import statements load this file: by its module name, or by a longer
        name that ends with it and resolves to it from the importer (a folder without
        __init__.py, a namespace package: `from src.train import x` loads src/train.py, whose
        module name here is `train`)."""
        if not sf.module:
            return []
        index = self.import_index()
        seen: dict[int, SourceFile] = {id(f): f for f in index.get(sf.module, [])}
        for key in self._tails().get(sf.module.rsplit(".", 1)[-1], ()):
            if key != sf.module and key.endswith("." + sf.module):
                for f in index[key]:
                    if id(f) not in seen and self.find_module(f, key) is sf:
                        seen[id(f)] = f
        return list(seen.values())

    def _tails(self) -> dict[str, list[str]]:
        """The import index's names by their last part (`src.train` under `train`)."""
        cached = self.cache.get("import-tails")
        if cached is None:
            tails: dict[str, list[str]] = {}
            for key in self.import_index():
                tails.setdefault(key.rsplit(".", 1)[-1], []).append(key)
            cached = self.cache["import-tails"] = tails
        return cached  # type: ignore[return-value]

    def parsed(self) -> Iterator[SourceFile]:
        return (f for f in self.files if f.tree is not None)

    def find_module(self, importer: SourceFile, dotted: str) -> SourceFile | None:
        """The file `import dotted` from `importer` loads, if it is one of the run's files."""
        if dotted.split(".", 1)[0] not in self._names:
            return None  # torch, os, numpy...: no file of the run has that name
        here = os.path.dirname(importer.path_abs())
        key = (here, dotted)
        if key not in self._found:
            self._found[key] = self._find(here, dotted)
        return self._found[key]

    def _find(self, here: str, dotted: str) -> SourceFile | None:
        candidates = self.by_module.get(dotted, [])
        if len(candidates) == 1:
            return candidates[0]
        if candidates:  # same name in several places: the one nearest the importer
            return max(candidates, key=lambda c: len(os.path.commonpath([here, c.path_abs()])))
        # Namespace packages and scripts run from a parent directory: look upwards.
        rel = dotted.replace(".", os.sep)
        d = here
        for _ in range(6):
            for candidate in (f"{rel}.py", os.path.join(rel, "__init__.py")):
                hit = self.by_abspath.get(os.path.normpath(os.path.join(d, candidate)))
                if hit is not None:
                    return hit
            parent = os.path.dirname(d)
            if parent == d:
                break
            d = parent
        return None

    def split(self, importer: SourceFile, dotted: str) -> tuple[SourceFile, list[str]] | None:
        """`pkg.mod.Cls.meth` -> (pkg/mod.py, ["Cls", "meth"]): the longest prefix that is a file."""
        parts = dotted.split(".")
        for n in range(len(parts), 0, -1):
            sf = self.find_module(importer, ".".join(parts[:n]))
            if sf is not None:
                return sf, parts[n:]
        return None


def _imported_names(f: SourceFile) -> set[str]:
    """The absolute module names a file's import statements name (`from a import b`: a and a.b)."""
    out: set[str] = set()
    for m in _IMPORT_LINE.finditer(f.data):
        dots, base, names, plain = (g.decode("utf-8", "replace") if g else "" for g in m.groups())
        if plain:
            out.update(p.split(" as ")[0].strip() for p in plain.split(",") if p.strip())
            continue
        root = absolute_module(f.package, len(dots), base or None)
        if root is None:
            continue
        out.add(root)
        out.update(f"{root}.{p.split(' as ')[0].strip()}" for p in names.split(",") if p.strip())
    return out
