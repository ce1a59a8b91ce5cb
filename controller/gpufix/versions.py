"""Normalise the version strings hosts report (kernels, drivers, wheels, distro packages)."""

from __future__ import annotations

import re

from packaging.version import InvalidVersion, Version

# A version starts at the beginning of the string (after an optional "V", as nvcc prints it):
# "-1" or "abc 5" are not versions, and must not read as 1 or 5.
_NUM = re.compile(r"[vV]?(\d+(?:\.\d+)*)")
# A driver version is dotted numbers, with an optional dpkg epoch and Debian revision around it.
_DRIVER = re.compile(r"(?:\d+:)?(\d+(?:\.\d+){0,2})(?:-[0-9A-Za-z.+~]+)?")


def parse(text: object) -> Version | None:
    """Best-effort Version from any version-ish string; None when there is no number in it.

    Handles '5.4.0-150-generic', '535.183.01', '2.1.2+cu121', '1:470.182.03-0ubuntu1',
    '5.4.0.150.167~18.04.1', '12.1.105-1', 'V11.8.89'.
    """
    if text is None or isinstance(text, bool):
        return None
    s = str(text).strip()
    if not s:
        return None
    if ":" in s.split(".")[0]:  # dpkg epoch
        s = s.split(":", 1)[1]
    try:
        return Version(s)
    except InvalidVersion:
        pass
    m = _NUM.match(s)
    if not m:
        return None
    try:
        return Version(m.group(1))
    except InvalidVersion:  # pragma: no cover - the regex only admits valid releases
        return None


def release(text: object, parts: int = 3) -> tuple[int, ...] | None:
    """The first `parts` numeric components, zero-padded: '5.4.0-150-generic' -> (5, 4, 0)."""
    v = parse(text)
    if v is None:
        return None
    rel = tuple(v.release[:parts])
    return rel + (0,) * (parts - len(rel))


def kernel(text: object) -> tuple[int, int, int] | None:
    """Kernel release as (major, minor, patch): '5.4.0-150-generic' -> (5, 4, 0)."""
    r = release(text, 3)
    return (r[0], r[1], r[2]) if r else None


def major_minor(text: object) -> tuple[int, int] | None:
    r = release(text, 2)
    return (r[0], r[1]) if r else None


def driver(text: object) -> Version | None:
    """NVIDIA driver version, epoch and Debian revision stripped: '1:535.183.01-0ubuntu1' -> 535.183.1.

    None for anything else ('abc', '', '535-abc x'): an unreadable driver is unknown, never "old".
    """
    if text is None or isinstance(text, bool):
        return None
    m = _DRIVER.fullmatch(str(text).strip())
    return Version(m.group(1)) if m else None


def driver_branch(text: object) -> int | None:
    """The driver branch: '535.183.01' -> 535, 535 -> 535; None when it is not a driver version."""
    if isinstance(text, int) and not isinstance(text, bool):
        return text if text > 0 else None
    v = driver(text)
    return v.release[0] if v is not None else None


def local_tag(text: object) -> str | None:
    """The local part of a wheel version: '2.1.2+cu121' -> 'cu121'; None when there is none."""
    if text is None:
        return None
    s = str(text)
    return s.split("+", 1)[1] if "+" in s else None


def cuda_from_tag(tag: str | None) -> tuple[int, int] | None:
    """'cu121' -> (12, 1); 'cu118' -> (11, 8); 'cu102' -> (10, 2); 'cpu'/'rocm' -> None."""
    if not tag:
        return None
    m = re.fullmatch(r"cu(\d{2,3})", tag)
    if not m:
        return None
    digits = m.group(1)
    return (int(digits[:-1]), int(digits[-1]))


def cuda_tag(cuda: tuple[int, int]) -> str:
    """(12, 1) -> 'cu121'."""
    return f"cu{cuda[0]}{cuda[1]}"


def at_least(text: object, floor: str) -> bool | None:
    """True/False when text parses; None when it does not (unknown is not 'too old')."""
    v = parse(text)
    if v is None:
        return None
    f = parse(floor)
    assert f is not None, floor
    return v >= f


_ZERO = Version("0")


def key(text: object) -> Version:
    """Sort key: unparsable versions sort first."""
    return parse(text) or _ZERO
