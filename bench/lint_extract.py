"""Write the Python files (and packaging, licence and side files) of one commit of a local git directory.

    .venv/bin/python bench/lint_extract.py GIT_DIR OUT_DIR COMMIT

Reads a git directory already on this machine (a snapshot brought once with the fetch tool);
fetches nothing. Blobs the snapshot lacks (large files) are skipped.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from typing import IO

from gpufix.workload.lint.sidefiles import NAMES, PREFIX, SUFFIXES

# pyproject.toml/setup.cfg for the configuration and for telling a packaged library from an
# application (setup.py is a .py file); licence files tell a vendored copy of another project
# from the project's own code (gpufix.workload.lint.discover.vendored).
KEEP = (
    "pyproject.toml", "setup.cfg",
    "LICENSE", "LICENSE.txt", "LICENSE.md", "LICENCE", "COPYING",
)  # fmt: skip
# Notebooks, shell launchers, Makefiles and configs that can name a function, as lint reads them
# (gpufix.workload.lint.sidefiles), up to the prefix it reads of each.


def extract(git_dir: str, out: str, commit: str) -> int:
    listing = subprocess.run(
        ["git", f"--git-dir={git_dir}", "ls-tree", "-r", "-l", commit],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    wanted = []
    for line in listing.splitlines():
        meta, path = line.split("\t", 1)
        mode, kind, sha, size = meta.split()
        side = (path.endswith(SUFFIXES) or os.path.basename(path) in NAMES) and (
            size.isdigit() and int(size) <= PREFIX  # "-" for a submodule, "BAD" when absent
        )
        if (
            kind == "blob"
            and mode != "120000"
            and (path.endswith(".py") or os.path.basename(path) in KEEP or side)
        ):
            wanted.append((sha, path))
    cat = subprocess.Popen(
        ["git", f"--git-dir={git_dir}", "cat-file", "--batch"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert cat.stdin is not None and cat.stdout is not None

    # Fed from a thread: git writes objects while it reads names, and both pipes are bounded.
    def feed(stdin: IO[bytes]) -> None:
        stdin.write("".join(f"{sha}\n" for sha, _ in wanted).encode())
        stdin.close()

    threading.Thread(target=feed, args=(cat.stdin,), daemon=True).start()
    written = 0
    for _, path in wanted:
        header = cat.stdout.readline().split()
        if header[1] == b"missing":
            continue
        data = cat.stdout.read(int(header[2]))
        cat.stdout.read(1)
        target = os.path.join(out, path)
        os.makedirs(os.path.dirname(target) or out, exist_ok=True)
        with open(target, "wb") as fh:
            fh.write(data)
        written += 1
    cat.wait()
    return written


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    print(extract(*sys.argv[1:]), "files")
