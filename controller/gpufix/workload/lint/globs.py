"""A lint glob (include/exclude) as a regular expression: `*` and `?` within one name, `**`
across names, `[...]` a class. Its own module: config checks the patterns when it reads them,
discover matches paths with them."""

from __future__ import annotations

import functools
import re

from gpufix.errors import InvalidInput


@functools.lru_cache(maxsize=256)
def glob_regex(pattern: str) -> re.Pattern[str]:
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[" and (end := pattern.find("]", i + 2)) > 0:
            body = pattern[i + 1 : end]
            neg = body.startswith(("!", "^"))
            body = body[1:] if neg else body
            out.append("[" + ("^" if neg else "") + body.replace("\\", "\\\\") + "]")
            i = end + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out))


def check(patterns: tuple[str, ...], where: str) -> tuple[str, ...]:
    """Each pattern compiles (a class such as [z-a] does not), else one line naming it."""
    for p in patterns:
        try:
            glob_regex(p)
        except re.error as exc:
            raise InvalidInput(f"{where}: bad glob {p!r}: {exc.msg}") from None
    return patterns
