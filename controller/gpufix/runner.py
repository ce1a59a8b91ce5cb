"""The only module that talks to ansible-runner: ad-hoc fact gathering and playbook runs.

Variables never reach a command line or a template: they are checked against the playbook's
argument specs (gpufix.apply.rolevars), written as a YAML file in the run's private directory
(0700, the file 0600, removed with it) with every string tagged !unsafe, and passed as
`-e @file`, so `ps` shows a path and Ansible never evaluates a value as Jinja.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import sys
import tempfile
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gpufix import paths
from gpufix.errors import InvalidInput
from gpufix.inputs import printable
from gpufix.paths import content_root

Progress = Callable[[str, str], None]  # (host, message)

# ansible-core 2.16 manages Python 2.7 and 3.6+ targets; older ones fail in ways we name.
_PYTHON_TOO_OLD = ("SyntaxError", "requires Python", "No module named 'json'", "not supported")
# ansible-core's message when the module's interpreter gave no result (not found, not Python):
# lib/ansible/plugins/action/__init__.py, _parse_returned_data
_INTERPRETER_FAILED = "you probably need to set the interpreter"
_NEEDS_TAIL = "See stdout/stderr for the exact error"
# An interpreter or script argument handed to an ad-hoc module: one word, no template syntax.
_WORD = re.compile(r"^[A-Za-z0-9._+/=:,^-]{1,4096}$")
_TAIL = 300  # characters of a failing module's stderr shown with its message

# Defaults of the --forks, --timeout and --playbook-timeout flags (gpufix.cli.common).
FORKS = 10  # hosts Ansible works on at once
FACTS_TIMEOUT_S = 120  # one fact-gathering run, all hosts together
FACTS_MODULE_BUDGET_S = 60  # gpufix_facts' total_timeout at the default --timeout
PLAYBOOK_TIMEOUT_S = 3600  # one playbook run that changes hosts (apply's steps, rollback)


@dataclass
class HostResult:
    host: str
    status: str = "ok"  # ok | failed | unreachable | skipped
    message: str = ""
    facts: dict[str, Any] | None = None
    stdout: str = ""  # of the last task that returned one (ad-hoc script/command)
    changed: int = 0
    results: list[dict[str, Any]] = field(default_factory=list)  # task results, for the journal
    # facts a play set with set_fact under a gpufix_* name (preflight report, probe verdict)
    data: dict[str, Any] = field(default_factory=dict)
    # what --check --diff said would change: [{"task", "diff"}] (file diffs, apt's plan)
    diffs: list[dict[str, Any]] = field(default_factory=list)
    task: str = ""  # the last task started on the host
    cut_off: bool = False  # the run was stopped (its time limit) before this host's play ended


@dataclass
class RunResult:
    ident: str
    rc: int
    status: str  # successful | failed | timeout | canceled
    hosts: dict[str, HostResult]


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    root = content_root()
    env = {
        "ANSIBLE_CONFIG": str(root / "ansible.cfg"),
        "ANSIBLE_LIBRARY": str(root / "plugins" / "modules"),
        # the roles' filters (plugins/filter/gpufix_kernel.py): the roles name them by their
        # short names, which only this folder answers outside an installed collection
        "ANSIBLE_FILTER_PLUGINS": str(root / "plugins" / "filter"),
        "ANSIBLE_ROLES_PATH": str(root / "roles"),
        "ANSIBLE_INJECT_FACT_VARS": "False",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_RETRY_FILES_ENABLED": "False",
    }
    # ansible-runner spawns `ansible`/`ansible-playbook` by name: use the ones installed
    # beside this interpreter (the venv), even when the venv is not activated.
    bindir = str(Path(sys.executable).parent)
    path = os.environ.get("PATH", "")
    if bindir not in path.split(os.pathsep):
        env["PATH"] = bindir + os.pathsep + path
    if extra:
        env.update(extra)
    return env


# playbook_on_stats: every host the play finished with, whatever its outcome
_STATS = ("ok", "changed", "failures", "dark", "skipped", "ignored", "rescued", "processed")
_RESULTS = ("runner_on_ok", "runner_on_failed", "runner_on_unreachable")


def _handler(
    hosts: dict[str, HostResult],
    progress: Progress | None,
    finished: set[str] | None = None,
    adhoc: bool = False,
) -> Callable[[dict], bool]:
    """finished collects the hosts whose play (or, ad hoc, whose one task) came to an end."""
    ended = finished if finished is not None else set()

    def handle(event: dict[str, Any]) -> bool:
        data = event.get("event_data") or {}
        host = data.get("host")
        kind = event.get("event", "")
        if kind == "playbook_on_stats":
            for key in _STATS:
                if isinstance(data.get(key), dict):
                    ended.update(data[key])
        if not host:
            return True
        hr = hosts.setdefault(host, HostResult(host=host))
        res = data.get("res") or {}
        task = data.get("task", "")
        if adhoc and kind in _RESULTS:
            ended.add(host)
        if kind == "runner_on_start":
            hr.task = task
            if progress:
                progress(host, task)
        elif kind == "runner_on_ok":
            set_facts = res.get("ansible_facts") or {}
            facts = set_facts.get("gpufix")
            if facts is not None:
                hr.facts = facts
            for key, value in set_facts.items():
                if key.startswith("gpufix_"):
                    hr.data[key] = value
            if "stdout" in res:
                hr.stdout = str(res.get("stdout") or "")
            if res.get("diff") and res.get("changed"):
                hr.diffs.append({"task": task, "diff": res["diff"]})
            item: dict[str, Any] = {"task": task, "changed": bool(res.get("changed"))}
            if res.get("changed"):
                hr.changed += 1
                # the files a copy/template/lineinfile/file task wrote (each item's, for a
                # loop), for the journal and uninstall's report
                paths = changed_paths(res)
                if paths:
                    item["path"], item["paths"] = paths[0], paths
                if res.get("rebooted"):
                    item["rebooted"] = True
            hr.results.append(item)
        elif kind == "runner_on_failed" and not data.get("ignore_errors"):
            if "stdout" in res:
                hr.stdout = str(res.get("stdout") or "")
            hr.status = "failed"
            hr.message = failure_message(res)
            hr.results.append({"task": task, "failed": True, "msg": hr.message})
        elif kind == "runner_on_unreachable":
            hr.status = "unreachable"
            hr.message = _one_line(_first_msg(res))
        return True

    return handle


def changed_paths(res: dict[str, Any]) -> list[str]:
    """The files a task changed: its own dest/path, or each changed loop item's."""
    loop = res.get("results")
    items: list[Any] = loop if isinstance(loop, list) else [res]
    out = []
    for r in items:
        if isinstance(r, dict) and r.get("changed"):
            path = r.get("dest") or r.get("path")
            if isinstance(path, str):
                out.append(path)
    return out


def _first_msg(res: dict[str, Any]) -> Any:
    """A loop's own msg is Ansible's "All items completed": the first item's says why."""
    for r in res.get("results") or []:
        if isinstance(r, dict) and r.get("msg"):
            return r["msg"]
    return res.get("msg")


def _one_line(text: Any, limit: int = 400) -> str:
    s = printable(" ".join(str(text or "").split()))  # a host's words, never terminal controls
    return s[:limit]


def failure_message(res: dict[str, Any]) -> str:
    """A failed task in one line; a module that died (MODULE FAILURE) says why from its stderr
    (a broken interpreter, a missing library) instead of "See stdout/stderr"."""
    msg = _one_line(res.get("msg") or res.get("module_stderr") or res.get("stderr"))
    if "MODULE FAILURE" in msg or not msg or msg == "non-zero return code" or _NEEDS_TAIL in msg:
        # "non-zero return code" (script, command) says nothing: the stderr says why
        raw = str(res.get("module_stderr") or res.get("stderr") or res.get("module_stdout") or "")
        tail = _one_line(raw[-_TAIL:], _TAIL)
        if tail:
            msg = f"{msg.split(' See stdout')[0] or 'MODULE FAILURE'}: {tail}"
    return msg


def python_unmanageable(message: str) -> bool:
    """True when a failure says the target's Python is one ansible-core 2.16 cannot drive, or
    that the interpreter named for the host did not run at all (Ansible's own words for it)."""
    if _INTERPRETER_FAILED in message:
        return True
    return any(m in message for m in _PYTHON_TOO_OLD) and "python" in message.lower()


def _run(
    *,
    inventory: Path,
    progress: Progress | None,
    timeout: int,
    keep_artifacts: Path | None = None,
    envvars: dict[str, str] | None = None,
    extravars: dict[str, Any] | None = None,
    cmdline: list[str] | None = None,
    **kwargs: Any,
) -> RunResult:
    """One ansible-runner job in a private directory. Raises KeyboardInterrupt when the job was
    canceled (Ctrl-C or SIGTERM reached ansible-runner), so no caller goes on after a signal."""
    import ansible_runner

    ident = kwargs.pop("ident", None) or uuid.uuid4().hex[:12]
    hosts: dict[str, HostResult] = {}
    finished: set[str] = set()
    tmp = Path(tempfile.mkdtemp(prefix="gpufix-runner-"))  # 0700
    args = list(cmdline or [])
    if "playbook" in kwargs:
        args += _implicit_local(tmp, inventory, str(kwargs.get("limit") or ""))
    if extravars:
        args += ["-e", "@" + str(write_extravars(tmp, extravars))]
    if args:
        kwargs["cmdline"] = " ".join(shlex.quote(a) for a in args)
    # ansible-runner would install SIGINT/SIGTERM handlers that cancel the job (status
    # "canceled") and never put the old ones back. Ours do the same, and a signal that arrives
    # after its loop has ended (the job then reads "successful") still ends this call; the old
    # handlers come back afterwards, so Ctrl-C between runs still interrupts.
    saved = _signal_handlers()
    signalled = _watch_signals(saved)
    try:
        r = ansible_runner.run(
            private_data_dir=str(tmp),
            ident=ident,
            inventory=str(inventory),
            project_dir=str(content_root()),
            quiet=True,
            suppress_env_files=True,
            timeout=timeout,
            envvars=_env(envvars),
            event_handler=_handler(hosts, progress, finished, adhoc="module" in kwargs),
            **({"cancel_callback": signalled.is_set} if saved else {}),
            **kwargs,
        )
        if keep_artifacts is not None:
            keep_artifacts.mkdir(parents=True, exist_ok=True, mode=0o700)
            src = tmp / "artifacts" / ident / "stdout"
            if src.is_file():
                shutil.copyfile(src, keep_artifacts / f"{ident}.stdout")
    finally:
        _restore_signal_handlers(saved)
        shutil.rmtree(tmp, ignore_errors=True)
    # checked once the old handlers are back: a signal up to then is in the event, one after
    # reaches them
    if r.status == "canceled" or signalled.is_set():
        raise KeyboardInterrupt
    if r.status != "successful":
        unfinished(hosts, finished, str(r.status), timeout)
    return RunResult(ident=ident, rc=int(r.rc or 0), status=str(r.status), hosts=hosts)


def _implicit_local(directory: Path, inventory: Path, limit: str) -> list[str]:
    """`-i FILE` listing the local names the limit gives and the inventory does not, as Ansible's
    implicit localhost is (local connection, the controller's Python): plays say `hosts: all`,
    which never matches the implicit one, so `gpufix apply`/`uninstall localhost` reached no
    host ("--limit leaves us with no hosts to target")."""
    from gpufix.inventory import unlisted_local

    names = unlisted_local(inventory, limit.split(","))
    if not names:
        return []
    path = directory / "gpufix-localhost.yml"
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    path.write_text(yaml.safe_dump({"all": {"hosts": {n: local for n in names}}}))
    return ["-i", str(path)]


def unfinished(hosts: dict[str, HostResult], finished: set[str], status: str, limit: int) -> None:
    """A run stopped before a host's play ended (its time limit, ansible-playbook dying) did not
    succeed there, whatever its tasks so far returned: the host failed, naming the task."""
    for h, hr in hosts.items():
        if hr.status != "ok" or h in finished:
            continue
        hr.status, hr.cut_off = "failed", True
        where = f" during '{_one_line(hr.task, 120)}'" if hr.task else ""
        if status == "timeout":
            hr.message = f"stopped at the {limit} s time limit{where}, before its play ended"
        else:
            hr.message = f"Ansible ended ({status}) before this host's play did{where}"


class _UnsafeDumper(yaml.SafeDumper):
    """YAML in which every string, keys included, is tagged !unsafe: Ansible keeps such values
    as AnsibleUnsafeText and never templates them."""


_UnsafeDumper.add_representer(str, lambda d, s: d.represent_scalar("!unsafe", s))


def write_extravars(directory: Path, extravars: dict[str, Any]) -> Path:
    """extravars as an !unsafe YAML file, 0600, in the run's private directory."""
    path = directory / "gpufix-extravars.yml"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    # a JSON round trip turns tuples into lists and refuses what is not data
    plain = json.loads(json.dumps(extravars))
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        yaml.dump(plain, fh, Dumper=_UnsafeDumper, default_flow_style=False, allow_unicode=True)
    return path


def _signal_handlers() -> dict[int, Any]:
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}


def _watch_signals(saved: dict[int, Any]) -> threading.Event:
    """SIGINT and SIGTERM set the event (main thread only, where `saved` is not empty)."""
    event = threading.Event()
    for sig in saved:
        signal.signal(sig, lambda *_: event.set())
    return event


def _restore_signal_handlers(saved: dict[int, Any]) -> None:
    for sig, handler in saved.items():
        if handler is not None:
            signal.signal(sig, handler)


def gather_facts(
    pattern: str,
    inventory: Path,
    *,
    python_envs: list[str] | None = None,
    timeout: int = FACTS_TIMEOUT_S,
    forks: int = FORKS,
    progress: Progress | None = None,
) -> RunResult:
    """Run our facts module ad hoc on the hosts matching `pattern`. Its arguments go as JSON
    (no key=value splitting) and each interpreter must be one plain word."""
    envs = list(python_envs or [])
    for py in envs:
        _check_word(py, "python_envs")
    # The module's own budget for all its commands ends well inside this run's limit, so a slow
    # host returns what it could read (the rest unknown) instead of failing as a whole.
    budget = max(1, min(FACTS_MODULE_BUDGET_S, timeout // 2))
    args: dict[str, Any] = {"timeout": min(10, budget), "total_timeout": budget}
    if envs:
        args["python_envs"] = envs
    return _run(
        inventory=inventory,
        progress=progress,
        timeout=timeout,
        module="gpufix_facts",
        module_args=json.dumps(args),
        host_pattern=pattern,
        forks=forks,
    )


def run_script(
    pattern: str,
    inventory: Path,
    script: Path,
    args: list[str],
    *,
    executable: str = "python3",
    timeout: int = 600,
    forks: int = FORKS,
    progress: Progress | None = None,
) -> RunResult:
    """Copy a local script to the hosts and run it there (ansible.builtin.script)."""
    _check_word(executable, "executable")
    for a in args:
        _check_word(a, "script argument")
    cmd = " ".join(shlex.quote(a) for a in [str(script), *args])
    return _run(
        inventory=inventory,
        progress=progress,
        timeout=timeout,
        module="ansible.builtin.script",
        module_args=f"{cmd} executable={shlex.quote(executable)}",
        host_pattern=pattern,
        forks=forks,
    )


def _check_word(value: str, what: str) -> None:
    if not _WORD.fullmatch(value):
        raise InvalidInput(
            f"{what} {value[:80]!r}: not one plain word (letters, digits, ./_+-=:,^)"
        )


def run_playbook(
    playbook: str,
    inventory: Path,
    *,
    limit: str,
    extravars: dict[str, Any] | None = None,
    check: bool = False,
    timeout: int = PLAYBOOK_TIMEOUT_S,
    forks: int = FORKS,
    ident: str | None = None,
    progress: Progress | None = None,
    keep_artifacts: Path | None = None,
    envvars: dict[str, str] | None = None,
) -> RunResult:
    """Run a playbook from playbooks/. Its variables are checked against the playbook's specs
    first (InvalidInput, nothing run) and passed as an !unsafe file (see the module doc)."""
    from gpufix.apply.rolevars import check_vars

    path = paths.playbook(playbook)
    check_vars(playbook, extravars or {}, f"{playbook} variables")
    return _run(
        inventory=inventory,
        progress=progress,
        timeout=timeout,
        playbook=str(path),
        limit=limit,
        extravars=extravars or {},
        cmdline=["--check", "--diff"] if check else None,
        forks=forks,
        ident=ident,
        keep_artifacts=keep_artifacts,
        envvars=envvars,
    )
