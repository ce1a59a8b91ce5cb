"""The host check before apply changes anything: run playbooks/host_check.yml (read-only)
and decide, in plain Python, whether each host may be changed. (A Ctrl-C during the play is
raised by gpufix.runner as KeyboardInterrupt.)"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpufix import inputs, runner, strategies, versions
from gpufix.inputs import schema_errors

# Checks a user may override with --force.
FORCEABLE = ("gpu-processes", "disk")
# The packages the host check reads (playbooks/host_check.yml's `keep`, the same text): what a
# strategy's roles install, so rollback can put them back. Rollback touches no other package,
# whatever a journal says (tests/adversarial/test_journal_seal.py compares the two).
TRACKED_PACKAGES = re.compile(
    r"^(nvidia-|libnvidia-|linux-image-|linux-modules-|linux-headers-|"
    r"linux-generic|cuda-|libcudnn|libnccl|docker|containerd|"
    r"libnvidia-container|fabricmanager|gpufix-|(dkms|pciutils)$)"
)
# The most of a file playbooks/host_check.yml saves for rollback (bytes); passed to the play as
# gpufix_preflight_save_limit (the playbook's default, for runs by hand, is the same number).
SAVE_LIMIT = 262144


@dataclass(frozen=True)
class Blocker:
    check: (
        str  # unreachable | python | gpu-processes | dpkg-lock | dpkg-broken | disk | nvidia-module
        # | file-too-large | probe-interpreter
    )
    message: str


@dataclass(frozen=True)
class Preflight:
    host: str
    blockers: tuple[Blocker, ...]
    warnings: tuple[str, ...] = ()
    report: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.blockers

    @property
    def unreachable(self) -> bool:
        return any(b.check in ("unreachable", "python") for b in self.blockers)

    def summary(self) -> str:
        return "; ".join(b.message for b in self.blockers) or "ok"


def python_manageable(version: str) -> bool:
    """ansible-core 2.16 manages targets with Python 2.7 or 3.6+ (its support matrix)."""
    v = versions.parse(version)
    if v is None:
        return False
    major, minor = v.release[0], (v.release[1] if len(v.release) > 1 else 0)
    return (major, minor) == (2, 7) or (major == 3 and minor >= 6) or major > 3


def evaluate(
    host: str,
    report: dict[str, Any],
    *,
    strategy: str,
    kernel_step: bool,
    force: Iterable[str] = (),
) -> Preflight:
    """Decide from a preflight report whether this host may be changed (pure)."""
    forced = set(force)
    blockers: list[Blocker] = []
    warnings: list[str] = []

    py = str(report.get("python") or "")
    if not python_manageable(py):
        blockers.append(
            Blocker("python", f"target Python {py or '?'} cannot be managed by ansible-core 2.16")
        )

    procs = report.get("gpu_processes")
    if isinstance(procs, list) and procs:
        names = ", ".join(f"{p.get('name', '?')}[{p.get('pid', '?')}]" for p in procs[:5])
        msg = f"{len(procs)} GPU compute process(es) running ({names})"
        if "gpu-processes" in forced:
            warnings.append(msg + ": going on because of --force gpu-processes")
        else:
            blockers.append(
                Blocker("gpu-processes", msg + ": stop them or use --force gpu-processes")
            )
    elif isinstance(procs, dict):
        warnings.append(f"could not list GPU processes: {procs.get('unknown', '?')}")

    dpkg = report.get("dpkg") or {}
    if dpkg.get("locks_held"):
        blockers.append(
            Blocker(
                "dpkg-lock",
                f"dpkg/apt lock still held after {dpkg.get('waited_s', '?')} s "
                f"({', '.join(dpkg['locks_held'])}): let the other package run finish",
            )
        )
    if dpkg.get("audit") or dpkg.get("interrupted"):
        blockers.append(
            Blocker(
                "dpkg-broken",
                "dpkg has half-configured or interrupted packages: "
                "run `dpkg --configure -a` on the host first",
            )
        )

    files = report.get("files") or {}
    for path, saved in sorted(files.items()) if isinstance(files, dict) else ():
        if isinstance(saved, dict) and saved.get("exists") and "content_b64" not in saved:
            blockers.append(
                Blocker(
                    "file-too-large",
                    f"{path} is {saved.get('size', '?')} bytes, more than the {SAVE_LIMIT // 1024}"
                    " KiB gpufix saves for rollback: it could not be put back; shrink it first",
                )
            )

    untrusted = report.get("probe_untrusted")
    if isinstance(untrusted, list) and untrusted:
        shown = "; ".join(f"{u.get('path', '?')} ({u.get('why', '?')})" for u in untrusted[:3])
        blockers.append(
            Blocker(
                "probe-interpreter",
                f"the probe that verifies the change would run, as root, code another account "
                f"can write: {shown}: give --probe-python a root-owned interpreter, or set "
                "gpufix_probe_trust_interpreter",
            )
        )

    need_boot, need_root = strategies.get(strategy).disk_need_mib
    disk = report.get("disk_mib") or {}
    for mount, need in (("/boot", need_boot), ("/", need_root)):
        free = disk.get(mount)
        if need and isinstance(free, int) and free < need:
            msg = f"{mount} has {free} MiB free, {strategy} needs about {need} MiB"
            if "disk" in forced:
                warnings.append(msg + ": going on because of --force disk")
            else:
                blockers.append(Blocker("disk", msg))

    if kernel_step:
        nv = report.get("nvidia") or {}
        if nv.get("driver_packages") and not (
            nv.get("dkms_sources") or nv.get("prebuilt_packages")
        ):
            blockers.append(
                Blocker(
                    "nvidia-module",
                    "the NVIDIA driver has neither DKMS sources nor prebuilt "
                    "linux-modules-nvidia packages: a new kernel would boot without it",
                )
            )
    return Preflight(host, tuple(blockers), tuple(warnings), report)


def unreachable(host: str, message: str) -> Preflight:
    if runner.python_unmanageable(message):
        return Preflight(host, (Blocker("python", f"target Python unmanageable: {message}"),))
    return Preflight(host, (Blocker("unreachable", message or "host unreachable"),))


def run_preflight(
    hosts: dict[str, dict[str, Any]],
    inventory: Path,
    *,
    force: Iterable[str] = (),
    dpkg_wait: int = 120,
    progress: runner.Progress | None = None,
    keep_artifacts: Path | None = None,
    forks: int = runner.FORKS,
    probe_vars: dict[str, Any] | None = None,
) -> dict[str, Preflight]:
    """Run the preflight playbook once for all `hosts` (name -> {strategy, kernel_step, files,
    probe_python}). `probe_vars`: the options of the probe that verifies the change (None: no
    probe follows), whose interpreter and PYTHONPATH are read for what another account can write.

    Hosts are run together because the checks are read-only; the watched files differ by
    strategy, so the union is read on every host (it is only read).
    """
    files = sorted({f for h in hosts.values() for f in h.get("files", [])})
    extravars: dict[str, Any] = {
        "gpufix_preflight_dpkg_wait": dpkg_wait,
        "gpufix_preflight_files": files,
        "gpufix_preflight_save_limit": SAVE_LIMIT,
    }
    if probe_vars is not None:
        # the probe that verifies the change runs as root: its interpreter is read now
        extravars["gpufix_preflight_probe_check"] = True
        extravars["gpufix_preflight_probe_python"] = {
            h: str(want["probe_python"])
            for h, want in hosts.items()
            if str(want.get("probe_python") or "").startswith("/")
        }
        for name in ("gpufix_probe_pythonpath", "gpufix_probe_trust_interpreter"):
            if name in probe_vars:
                extravars[name] = probe_vars[name]
    res = runner.run_playbook(
        "host_check.yml",
        inventory,
        limit=",".join(hosts),
        extravars=extravars,
        timeout=dpkg_wait + 300,
        forks=forks,
        progress=progress,
        keep_artifacts=keep_artifacts,
    )
    out: dict[str, Preflight] = {}
    for name, want in hosts.items():
        hr = res.hosts.get(name)
        if hr is None:
            out[name] = unreachable(name, f"no result from preflight (run {res.status})")
        elif hr.status == "unreachable":
            out[name] = unreachable(name, hr.message)
        elif "gpufix_preflight" not in hr.data:
            msg = hr.message or "preflight did not report"
            if runner.python_unmanageable(msg):
                out[name] = unreachable(name, msg)
            else:
                out[name] = Preflight(name, (Blocker("preflight", f"preflight failed: {msg}"),))
        elif problems := _unusable(hr.data["gpufix_preflight"]):
            # the host wrote this report: one that breaks the schema, or that the journal could
            # not hold and read back, is not decided from (nor journaled)
            out[name] = Preflight(
                name, (Blocker("preflight", f"unusable host check report: {problems}"),)
            )
        else:
            out[name] = evaluate(
                name,
                _known(hr.data["gpufix_preflight"]),
                strategy=want["strategy"],
                kernel_step=bool(want.get("kernel_step")),
                force=force,
            )
    return out


# A report goes into the journal twice (before and after) a few levels down, and a journal is
# read back with inputs' bounds: a report near those bounds would make the whole run unreadable
# (its rollback and resume refused for every host). Far below them, a real report: about 40
# tracked packages, a few watched files of at most SAVE_LIMIT each, 6 levels deep.
# The reader counts bytes and every comma of the file (inside strings too) against its limits:
# two reports and the rest of the record stay under them with a quarter each.
REPORT_MAX_DEPTH = inputs.MAX_DEPTH - 12
REPORT_MAX_BYTES = inputs.MAX_BYTES["journal"] // 4
REPORT_MAX_COMMAS = inputs.MAX_NODES // 4


def _unusable(report: Any) -> str | None:
    problems = schema_errors(report, "host-check")
    if problems:
        return problems[0]
    try:
        inputs.check_tree(report, "the report", limit=REPORT_MAX_DEPTH)
    except inputs.InvalidInput as e:
        return str(e)
    text = json.dumps(report, indent=2, sort_keys=True, default=str)  # as the journal writes it
    if len(text.encode("utf-8", "surrogatepass")) > REPORT_MAX_BYTES:
        return f"over {REPORT_MAX_BYTES >> 20} MiB"
    if text.count(",") > REPORT_MAX_COMMAS:
        return f"over {REPORT_MAX_COMMAS} values"
    return None


def _known(report: dict[str, Any]) -> dict[str, Any]:
    """Only what the schema names: a key it does not know is not journaled."""
    names = inputs.schema("host-check").get("properties", {})
    return {k: v for k, v in report.items() if k in names}


# What holds a reboot of a host whose change already ran (a resumed reboot, a rollback's): the
# host cannot be read, or it is busy (GPU jobs, another package run, a half-configured dpkg).
REBOOT_HOLDS = ("unreachable", "python", "preflight", "gpu-processes", "dpkg-lock", "dpkg-broken")


def before_reboot(
    hosts: Iterable[str],
    inventory: Path,
    *,
    force: Iterable[str] = (),
    progress: runner.Progress | None = None,
    forks: int = runner.FORKS,
) -> dict[str, Preflight]:
    """The host check before a reboot whose steps ran earlier: read-only, no dpkg wait (a busy
    host waits for the next run). `reboot_hold` reads the answer."""
    return run_preflight(
        {h: {"strategy": "none", "files": []} for h in hosts},
        inventory,
        force=force,
        dpkg_wait=0,
        progress=progress,
        forks=forks,
    )


def reboot_hold(got: Preflight) -> Blocker | None:
    """The first reason not to reboot this host now, or None."""
    return next((b for b in got.blockers if b.check in REBOOT_HOLDS), None)
