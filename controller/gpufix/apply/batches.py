"""Rolling batches: a canary of one host first, then batches of N hosts or N% of them."""

from __future__ import annotations

import math

from gpufix.errors import InvalidInput


def parse_batch(spec: str, total: int) -> int:
    """'3' -> 3 hosts, '25%' -> ceil(25% of total), at least 1."""
    s = str(spec).strip()
    try:
        if s.endswith("%"):
            pct = float(s[:-1])
            if not 0 < pct <= 100:
                raise ValueError
            return max(1, math.ceil(total * pct / 100))
        n = int(s)
        if n < 1:
            raise ValueError
        return n
    except ValueError:
        raise InvalidInput(
            f"bad --batch {spec!r}: give a host count (2) or a percentage (25%)"
        ) from None


def batches(hosts: list[str], spec: str, *, canary: bool = True) -> list[list[str]]:
    """Rolling batches: a canary of one host first, then batches of `spec`."""
    if not hosts:
        return []
    size = parse_batch(spec, len(hosts))
    out: list[list[str]] = []
    rest = list(hosts)
    if canary and len(rest) > 1:
        out.append([rest.pop(0)])
    while rest:
        out.append(rest[:size])
        rest = rest[size:]
    return out
