"""A seal on each journal file: an HMAC with a key only this state directory holds. gpufix acts
on a journal (a rollback writes its files back as root, a resume skips the steps it says are
done) only when every file carries the seal this controller wrote: a journal from a ticket, a
backup of another machine or an edit names files, modes and packages, and the content of files
that root runs (/etc/default/grub, which update-grub sources). Reading one (`gpufix status`) needs
no seal: its text is escaped wherever it is shown."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import hmac
import json
import os
import re
import secrets
import stat
from pathlib import Path
from typing import Any

from gpufix.errors import GpufixError
from gpufix.paths import private_dir

FIELD = "seal"
_KEY_FILE = "journal.key"
_HEX64 = re.compile(rb"[0-9a-f]{64}")


def _key() -> bytes:
    path = private_dir("keys") / _KEY_FILE
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
    for _ in range(2):
        try:
            fd = os.open(path, flags)
        except FileNotFoundError:
            _new_key(path)
            continue
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise GpufixError(
                    f"the journal key {path} is a symbolic link: refusing it"
                ) from None
            raise GpufixError(f"cannot read the journal key {path}: {e.strerror}") from None
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
                raise GpufixError(
                    f"the journal key {path} is not a private file of this user: refusing it"
                )
            text = fh.read(200).strip()
        if not _HEX64.fullmatch(text):
            raise GpufixError(
                f"the journal key {path} is damaged: journals cannot be sealed or checked; "
                "remove it only if no run of this state directory is to be resumed or rolled back"
            )
        return bytes.fromhex(text.decode("ascii"))
    raise GpufixError(f"cannot create the journal key {path}")


def _new_key(path: Path) -> None:
    """Written whole under another name, then linked into place: a reader never sees half a
    key, two first runs at once end with one key, and a crash leaves no empty one."""
    tmp = path.with_name(f".{_KEY_FILE}.{os.getpid()}.{secrets.token_hex(4)}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_hex(32) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        with contextlib.suppress(FileExistsError):  # another run made it first: theirs wins
            os.link(tmp, path)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise GpufixError(f"the journal key {path} is a symbolic link: refusing it") from None
        raise GpufixError(f"cannot create the journal key {path}: {e.strerror}") from None
    finally:
        tmp.unlink(missing_ok=True)


def _digest(doc: dict[str, Any]) -> str:
    body = {k: v for k, v in doc.items() if k != FIELD}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hmac.new(_key(), text.encode("ascii"), hashlib.sha256).hexdigest()


def sealed_copy(doc: dict[str, Any]) -> dict[str, Any]:
    """The document as JSON reads it back (values that are not JSON become text), sealed."""
    plain: dict[str, Any] = json.loads(json.dumps(doc, default=str))
    plain.pop(FIELD, None)
    plain[FIELD] = _digest(plain)
    return plain


def holds(doc: dict[str, Any]) -> bool:
    """The document carries this controller's seal over exactly what it says."""
    got = doc.get(FIELD)
    return isinstance(got, str) and hmac.compare_digest(got, _digest(doc))
