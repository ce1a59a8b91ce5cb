"""--forks, --timeout and --playbook-timeout reach the real Ansible runs (issue 15).

The hosts are this machine under three names (ansible_connection: local). Their interpreter is a
shell wrapper that notes how many module runs are in flight at once, then runs the module with
this Python: Ansible's own parallelism, measured from outside, says which --forks it was given.
Only read-only work runs here: the facts module, and uninstall.yml in check mode.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from gpufix.cli import main

HOSTS = ("h1", "h2", "h3")


def _inventory(tmp_path: Path, interpreter: Path) -> Path:
    inv = tmp_path / "inv.yml"
    lines = ["all:", "  children:", "    grp:", "      hosts:"]
    for h in HOSTS:
        lines += [
            f"        {h}:",
            "          ansible_connection: local",
            f"          ansible_python_interpreter: {interpreter}",
        ]
    inv.write_text("\n".join(lines) + "\n")
    return inv


@pytest.fixture
def counting(tmp_path: Path) -> tuple[Path, Path]:
    """(inventory, log): each module run appends how many were running at once to the log."""
    live, log = tmp_path / "live", tmp_path / "in-flight.log"
    live.mkdir()
    wrapper = tmp_path / "countingpython"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'touch "{live}/$$"\n'
        "sleep 2\n"  # long enough for parallel runs to overlap
        f'ls "{live}" | wc -l >> "{log}"\n'
        f'rm -f "{live}/$$"\n'
        f'exec {sys.executable} "$@"\n'
    )
    wrapper.chmod(0o755)
    return _inventory(tmp_path, wrapper), log


def gpufix(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    full = {
        **os.environ,
        **(env or {}),
        "GPUFIX_STATE_DIR": str(tmp_path / "state"),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    return subprocess.run(
        [sys.executable, "-m", "gpufix", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        stdin=subprocess.DEVNULL,
        env=full,
    )


def in_flight(log: Path) -> list[int]:
    seen = [int(n) for n in log.read_text().split()]
    log.unlink()
    return seen


@pytest.mark.slow  # Ansible runs on this machine under three names
def test_plan_gathers_forks_hosts_at_once(counting: tuple[Path, Path], tmp_path: Path) -> None:
    inv, log = counting
    # the flag wins over Ansible's own setting
    flag = ("--forks", "1", "--json")
    r = gpufix(tmp_path, "plan", "grp", "-i", str(inv), *flag, env={"ANSIBLE_FORKS": "3"})
    assert r.returncode == 0, r.stderr
    assert sorted(p["host"] for p in json.loads(r.stdout)["plans"]) == list(HOSTS)
    seen = in_flight(log)
    assert len(seen) == 3 and max(seen) == 1, seen  # one host at a time
    r = gpufix(tmp_path, "diff", "grp", "-i", str(inv), "--forks", "3", "--json")
    assert r.returncode == 0, r.stderr
    assert max(in_flight(log)) > 1  # the three overlapped: the wrapper does see parallel runs


@pytest.mark.slow  # Ansible runs on this machine under three names
def test_apply_uses_its_flags_for_every_run(counting: tuple[Path, Path], tmp_path: Path) -> None:
    """A plan with nothing to do: apply gathers facts again (the stale-plan check) with --forks
    and journals the run's limits; no playbook changes anything."""
    inv, log = counting
    plan = tmp_path / "plan.json"
    r = gpufix(tmp_path, "plan", "grp", "-i", str(inv), "-o", str(plan), "--forks", "3")
    assert r.returncode == 0, r.stderr
    if any(p["strategy"] != "none" for p in json.loads(plan.read_text())["plans"]):
        pytest.skip("this machine's facts give a plan with changes: apply would change it")
    in_flight(log)
    flags = ("--forks", "1", "--timeout", "300", "--playbook-timeout", "900", "--yes")
    r = gpufix(tmp_path, "apply", str(plan), "-i", str(inv), *flags)
    assert r.returncode == 0, r.stderr
    seen = in_flight(log)
    # the stale-plan gather on each of the three names, one at a time (no host lock: a host with
    # nothing to do is not locked)
    assert len(seen) == 3 and max(seen) == 1, seen
    r = gpufix(tmp_path, "status", "latest", "--json")
    options = json.loads(r.stdout)["run"]["options"]
    assert (options["forks"], options["facts_timeout"], options["playbook_timeout"]) == (
        1,
        300,
        900,
    )


@pytest.mark.slow  # Ansible runs on this machine under three names
def test_uninstall_runs_its_playbook_with_forks(
    counting: tuple[Path, Path], tmp_path: Path
) -> None:
    inv, log = counting
    r = gpufix(tmp_path, "uninstall", "grp", "-i", str(inv), "--check", "--yes", "--forks", "1")
    assert r.returncode == 0, r.stderr
    seen = in_flight(log)
    assert len(seen) >= 3 and max(seen) == 1, seen


def test_a_gathering_past_timeout_is_one_line_and_exit_4(tmp_path: Path) -> None:
    """An interpreter that never answers (and never runs anything): --timeout ends the run."""
    never = tmp_path / "neverpython"
    never.write_text("#!/bin/sh\nsleep 120\nexit 1\n")
    never.chmod(0o755)
    inv = _inventory(tmp_path, never)
    t0 = time.monotonic()
    r = gpufix(tmp_path, "facts", "h1", "-i", str(inv), "--timeout", "5")
    assert time.monotonic() - t0 < 100  # ended by the limit, not by the interpreter
    assert r.returncode == 4, r.stderr
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "5 s gathering limit" in lines[0] and "--timeout" in lines[0]


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (("plan", "host01", "--forks", "0"), "--forks"),
        (("diff", "host01", "host02", "--forks", "501"), "--forks"),
        (("probe", "host01", "--forks", "x"), "--forks"),
        (("uninstall", "host01", "--forks", "-1"), "--forks"),
        (("facts", "host01", "--timeout", "0"), "--timeout"),
        (("apply", "plan.json", "--timeout", "86401"), "--timeout"),
        (("apply", "plan.json", "--playbook-timeout", "10"), "--playbook-timeout"),
        (("rollback", "latest", "h1", "--playbook-timeout", "0"), "--playbook-timeout"),
    ],
)
def test_out_of_range_values_are_usage_errors(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...], flag: str
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    err = capsys.readouterr().err
    assert exc.value.code == 3 and "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"gpufix: error: Invalid value for '{flag}'")
