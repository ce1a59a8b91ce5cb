"""Which files a run reads (include/exclude globs, hidden and virtualenv directories skipped) and
what kind of code each one is: the project's own code, a test, an example, or a library."""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator, Sequence

from gpufix.errors import InvalidInput

from .config import LintConfig
from .globs import glob_regex

_SKIP_DIRS = frozenset({"__pycache__", "node_modules"})
# Installed or vendored code: not the user's to change.
LIBRARY_DIRS = frozenset(
    {"site-packages", "dist-packages", "vendor", "vendored", "_vendor", "third_party",
     "third-party", "thirdparty", "3rdparty"}
)  # fmt: skip
TEST_DIRS = frozenset({"tests", "test", "testing", "unittests", "unit_tests"})
EXAMPLE_DIRS = frozenset(
    {"examples", "example", "demo", "demos", "tutorials", "tutorial", "samples", "sample"}
)
_GLOB = frozenset("*?[")


def classify(rel: str) -> str:
    """code | test | example | library, from the path relative to the project root."""
    parts = [p.lower() for p in rel.replace(os.sep, "/").split("/")]
    dirs, name = parts[:-1], parts[-1]
    if any(p in LIBRARY_DIRS for p in dirs):
        return "library"
    if (
        any(p in TEST_DIRS for p in dirs)
        or name == "conftest.py"
        or (name.startswith("test_") and name.endswith(".py"))
        or name.endswith("_test.py")
    ):
        return "test"
    if any(p in EXAMPLE_DIRS for p in dirs):
        return "example"
    return "code"


_PROJECT_FILES = ("setup.py", "pyproject.toml")
_LICENSE_FILES = ("LICENSE", "LICENSE.txt", "LICENSE.md", "LICENCE", "COPYING")


def vendored(path: str, rel: str) -> bool:
    """The file sits in a copy of another project kept inside one of this project's packages: a
    directory with its own setup.py or pyproject.toml and its own licence file, whose parent
    directory has __init__.py (Natithan/DIRT keeps jiant as src/jiant). Not one: a monorepo's
    packages/x/ (no package around it), a CUDA extension's setup.py or a module named setup.py
    (no licence of their own: fairseq/modules/lightconv_layer, lightning's trainer/setup.py)."""
    rel = rel.replace(os.sep, "/")
    parts = rel.split("/")[:-1]
    if not parts or ".." in parts or not path.replace(os.sep, "/").endswith(rel):
        return False
    base = path[: len(path) - len(rel)] or "."
    return any(_copied_project(os.path.join(base, *parts[:k])) for k in range(1, len(parts) + 1))


@functools.lru_cache(maxsize=4096)
def _copied_project(directory: str) -> bool:
    if not any(os.path.isfile(os.path.join(directory, f)) for f in _PROJECT_FILES):
        return False
    if not any(os.path.isfile(os.path.join(directory, f)) for f in _LICENSE_FILES):
        return False
    return os.path.isfile(os.path.join(os.path.dirname(directory), "__init__.py"))


def _build_copy(parent: str, name: str) -> bool:
    """setuptools' copy of the project's own modules (`build/lib`, `build/lib.linux-x86_64-...`):
    read twice, every finding would be reported twice."""
    return os.path.basename(os.path.normpath(parent)) == "build" and (
        name == "lib" or name.startswith("lib.")
    )


def matches(rel: str, pattern: str) -> bool:
    """A glob against a root-relative POSIX path, as gitignore reads one: a pattern with no `/`
    but at its end matches a file or directory name at any level, one with a `/` from the root;
    `*` and `?` stay within one name, `**` crosses them (`**/` also matches none); a pattern
    that matches a directory also matches what lies below it."""
    anchored = "/" in pattern.rstrip("/")  # `a/b`, `/a`: from the root; `a`, `*.py`: any level
    pattern = pattern.strip("/")
    while pattern.startswith("./"):
        pattern = pattern[2:]
    parts = rel.split("/")
    if not anchored:
        if not _GLOB & set(pattern):
            return pattern in parts
        rx = glob_regex(pattern)
        return any(rx.fullmatch(part) for part in parts)
    if not _GLOB & set(pattern):
        return rel == pattern or rel.startswith(pattern + "/")
    rx = glob_regex(pattern)
    return any(rx.fullmatch("/".join(parts[:n])) for n in range(len(parts), 0, -1))


def relative(path: str, config: LintConfig) -> str:
    rel = os.path.relpath(os.path.abspath(path), os.path.abspath(config.root))
    return rel.replace(os.sep, "/")


def _wanted(rel: str, config: LintConfig) -> bool:
    if any(matches(rel, p) for p in config.exclude):
        return False
    return not config.include or any(matches(rel, p) for p in config.include)


def iter_python_files(
    paths: Sequence[str], config: LintConfig, unreadable: list[str] | None = None
) -> Iterator[tuple[str, str]]:
    """(path, root-relative path): files named on the command line always, *.py under
    directories when include/exclude allow (hidden directories and virtualenvs skipped). A
    directory that cannot be listed goes to `unreadable` ("path: why"), never passed over unsaid."""

    def cannot_list(exc: OSError) -> None:
        if unreadable is not None:
            unreadable.append(f"{exc.filename}: directory not readable ({exc.strerror})")

    for p in paths:
        if not os.path.isdir(p):
            if p.endswith(".ipynb"):
                # its JSON parses as one Python expression: it would "pass" unread
                raise InvalidInput(
                    f"{p}: a Jupyter notebook, not a Python file: export it first "
                    "(jupyter nbconvert --to script) and lint the .py"
                )
            yield p, relative(p, config)
            continue
        for root, dirs, files in os.walk(p, onerror=cannot_list):
            dirs[:] = sorted(
                d
                for d in dirs
                if not d.startswith(".")
                and d not in _SKIP_DIRS
                and not _build_copy(root, d)
                and not os.path.exists(os.path.join(root, d, "pyvenv.cfg"))
                and not any(
                    matches(relative(os.path.join(root, d), config), x) for x in config.exclude
                )
            )
            for name in sorted(files):
                if name.endswith(".py"):
                    path = os.path.join(root, name)
                    rel = relative(path, config)
                    if _wanted(rel, config):
                        yield path, rel
