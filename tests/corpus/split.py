"""The dev/test split of the corpus: a pure function of the thread URL, fixed before scoring."""

from __future__ import annotations

import hashlib


def split_of(source: str) -> str:
    """'test' for about a third of the URLs, 'dev' for the rest (README.md, "Split")."""
    digest = hashlib.sha256(source.encode("utf-8")).hexdigest()
    return "test" if int(digest, 16) % 3 == 0 else "dev"
