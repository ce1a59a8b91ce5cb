"""Where gpufix's Ansible content and its state live.

The Ansible content (ansible.cfg, roles/, playbooks/, plugins/modules/, inventory/) is the
repository root of a checkout, which is also the `gpufix.fleet` collection. A wheel carries the
same files as package data under `gpufix/_content/`. `GPUFIX_HOME` overrides both.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from gpufix.errors import GpufixError, InvalidInput

_MARKERS = ("ansible.cfg", "playbooks", "roles", "plugins/modules/gpufix_facts.py")
_PACKAGE = Path(__file__).resolve().parent


def _is_content(path: Path) -> bool:
    try:
        return all((path / m).exists() for m in _MARKERS)
    except OSError:  # a name too long, a loop of links: not content
        return False


def content_root() -> Path:
    """$GPUFIX_HOME, else the content shipped in the wheel, else the checkout this runs from."""
    env = os.environ.get("GPUFIX_HOME")
    if env:
        if _is_content(Path(env)):
            return Path(env).resolve()
        raise InvalidInput(
            f"GPUFIX_HOME={env[:200]}{'...' if len(env) > 200 else ''} holds no gpufix content "
            "(ansible.cfg, playbooks/, roles/, plugins/)"
        )
    for candidate in (_PACKAGE / "_content", _PACKAGE.parents[1]):
        if _is_content(candidate):
            return candidate
    raise GpufixError(
        "this gpufix install has no Ansible content (roles, playbooks): reinstall the wheel, "
        "or set GPUFIX_HOME to a checkout"
    )


def playbook(name: str) -> Path:
    return content_root() / "playbooks" / name


def facts_module() -> Path:
    return content_root() / "plugins" / "modules" / "gpufix_facts.py"


def probe_program() -> Path:
    """The probe program, shipped to hosts by roles/probe and run locally by `gpufix probe`."""
    return content_root() / "roles" / "probe" / "files" / "gpufix_probe.py"


def default_inventory() -> Path:
    return content_root() / "inventory" / "example.yml"


def state_path() -> Path:
    """Where the state directory is ($GPUFIX_STATE_DIR, else ~/.local/state/gpufix), created or
    not: commands that only read (`gpufix status`) create nothing."""
    base = os.environ.get("GPUFIX_STATE_DIR")
    if base and not os.path.isabs(base):
        # journals under the working directory: a resume from elsewhere would not find them
        raise InvalidInput(f"GPUFIX_STATE_DIR={base[:200]!r} is not an absolute path")
    return Path(base) if base else Path.home() / ".local" / "state" / "gpufix"


def state_exists() -> bool:
    """Whether the state directory exists, for commands that only read: a path through a
    regular file or one the kernel refuses (too long) is an error, not "no runs yet"."""
    path = state_path()
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        shown = str(path)[:200] + ("..." if len(str(path)) > 200 else "")
        raise GpufixError(f"cannot read the state directory {shown}: {exc.strerror}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise GpufixError(f"the state directory {path} is not a directory")
    return True


def state_dir() -> Path:
    """Journals, locks and run data. Created 0700 when gpufix creates it; an existing directory
    (GPUFIX_STATE_DIR may name a shared one) keeps its mode: gpufix's own subdirectories
    (runs/, locks/) are 0700 instead (gpufix.paths.private_dir)."""
    path = state_path()
    try:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        raise GpufixError(f"cannot create the state directory {path}: {exc.strerror}") from None
    if not path.is_dir():
        raise GpufixError(f"the state directory {path} is not a directory")
    st = path.stat()
    # Another account that can rename what it holds could put its own runs/ in place of ours
    # between the checks and the reads: a journal that root's rollback would then restore from.
    others_write = st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX
    if st.st_uid not in (0, os.getuid()) or others_write:
        raise GpufixError(
            f"the state directory {path} can be changed by another account (owner uid "
            f"{st.st_uid}, mode {stat.S_IMODE(st.st_mode):04o}): use one only you (or root) can "
            "write, or one with the sticky bit"
        )
    return path


def private_dir(name: str) -> Path:
    """state_dir()/name, 0700 and owned by this user; refused when someone else owns it."""
    path = state_dir() / name
    try:
        path.mkdir(mode=0o700, exist_ok=True)
        st = path.lstat()
    except OSError as exc:
        raise GpufixError(f"cannot create {path}: {exc.strerror}") from None
    if not path.is_dir() or path.is_symlink() or st.st_uid != os.getuid():
        raise GpufixError(f"{path} is not a directory this user owns: refusing to use it")
    if st.st_mode & 0o077:
        os.chmod(path, 0o700)
    return path
