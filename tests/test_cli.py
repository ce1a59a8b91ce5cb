"""The CLI on the example inventory's recorded hosts: output, exit codes, one-line errors."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from gpufix.errors import GpufixError

ROOT = Path(__file__).resolve().parents[1]
HOSTS = ROOT / "tests" / "fixtures" / "hosts"


def gpufix(*args: str, columns: int = 160) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpufix", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "COLUMNS": str(columns)},
    )


def one_line_error(r: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in r.stderr
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("gpufix: error:")
    return lines[0]


def test_plan_host01_shows_the_decision() -> None:
    """No probe verdict: the kernel below accelerate's threshold and ACS/IOMMU are warnings, so
    nothing that reboots is chosen, and the plan says the probe would decide."""
    r = gpufix("plan", "host01")
    assert r.returncode == 0, r.stderr  # planning succeeded (terraform's convention)
    out = r.stdout
    for part in (
        "Findings",
        "Decision path",
        "not chosen without a probe verdict",
        "Strategies considered",
        "Chosen strategy: none",
        "Would decide better",
        "gpufix probe host01",
    ):
        assert part in out, part
    assert "HOST`" not in out  # every command names the planned host (a review, 2026-12-06)
    forced = gpufix("plan", "host01", "--strategy", "kernel-upgrade").stdout
    for part in ("Chosen strategy: kernel-upgrade", "Reboot: yes", "still below"):
        assert part in forced, part
    assert "linux-generic-hwe-18.04" in forced


def test_plan_json_is_json_alone_on_stdout() -> None:
    r = gpufix("plan", "host01", "--json")
    doc = json.loads(r.stdout)
    (plan,) = doc["plans"]
    assert plan["format"] == "gpufix-plan" and plan["host"] == "host01"
    assert plan["strategy"] == "none" and plan["extra"]["needs"][0]["id"] == "probe"
    assert all(f["source"] for f in plan["findings"])


def test_plan_group_covers_every_host(tmp_path: Path) -> None:
    out = tmp_path / "fleet.json"
    r = gpufix("plan", "gpu_fleet", "--json", "-o", str(out), "--detailed-exitcode")
    assert r.returncode == 2  # changes proposed
    hosts = {p["host"] for p in json.loads(r.stdout)["plans"]}
    want = {f"host{n:02d}" for n in range(1, 13)} - {"host06"}  # host06 is in cpu_only
    assert hosts == want
    assert len(json.loads(out.read_text())["plans"]) == 11


def test_nothing_to_do_exits_0() -> None:
    r = gpufix("plan", "host06", "--detailed-exitcode")
    assert r.returncode == 0
    assert "Chosen strategy: none" in r.stdout


@pytest.mark.parametrize(("flags", "code"), [((), 0), (("--detailed-exitcode",), 2)])
def test_plan_exit_codes_follow_terraform(flags: tuple[str, ...], code: int) -> None:
    """0 when planning succeeded; 2 for "changes proposed" only when asked, so that
    `gpufix plan host09 && next` works in a shell (host09: a driver/library mismatch)."""
    assert gpufix("plan", "host09", *flags).returncode == code


def test_offline_plan_from_snapshot() -> None:
    r = gpufix("plan", "whatever", "--facts", str(HOSTS / "jammy-470-torch23.json"), "--json")
    assert r.returncode == 0
    assert json.loads(r.stdout)["plans"][0]["strategy"] == "driver-pin"


def test_text_plan_says_what_is_missing_and_where_the_decision_comes_from(tmp_path: Path) -> None:
    """An interface stall between nodes with the interfaces unread: the text plan names the
    decision's source and, since a step parameter is missing, says the plan is incomplete."""
    snap = json.loads((HOSTS / "bionic-ga-2x3090.json").read_text())
    snap["facts"]["network"] = {"unknown": "not read"}
    verdict = json.loads((ROOT / "docs" / "device" / "h200-probe-healthy.json").read_text())
    # The H200's own readings (torch, NCCL, driver) are not this host's: drop them.
    verdict.update(verdict="hung", causes=[], stalled={"phase": "pg_init", "ranks": [1]},
                   scope="multi-node", failed_layer="interface", hosts=["a", "b"],
                   failed_hosts=["b"], facts={})  # fmt: skip
    (tmp_path / "f.json").write_text(json.dumps(snap))
    (tmp_path / "v.json").write_text(json.dumps(verdict))
    r = gpufix("plan", "x", "--facts", str(tmp_path / "f.json"), "--probe-verdict",
               str(tmp_path / "v.json"))  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "INCOMPLETE" in r.stdout and "interfaces:" in r.stdout, r.stdout
    assert "decided by: layer-interface" in r.stdout and "troubleshooting" in r.stdout


def test_text_plan_names_a_table_row_whose_fix_was_not_chosen(tmp_path: Path) -> None:
    """One GPU: the P2P row matches, but its fix is moot here, so the text must not read as if
    that row decided the chosen `none` (second review of issue 12's fixes)."""
    verdict = json.loads((ROOT / "docs" / "device" / "h200-probe-healthy.json").read_text())
    exp = {"id": "p2p-off", "env": {"NCCL_P2P_DISABLE": "1"}, "gpus": None, "stalled": None,
           "error": None, "verdict": "healthy", "elapsed_s": 1.0}  # fmt: skip
    verdict.update(verdict="hung", causes=[], stalled={"phase": "allreduce", "ranks": [0, 1]},
                   experiments=[exp], decided_by="p2p-off", facts={})  # fmt: skip
    (tmp_path / "v.json").write_text(json.dumps(verdict))
    r = gpufix("plan", "x", "--facts", str(HOSTS / "bionic-single-gpu.json"), "--probe-verdict",
               str(tmp_path / "v.json"))  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "Chosen strategy: none" in r.stdout, r.stdout
    assert "decided by:" not in r.stdout and "not chosen: see the path" in r.stdout


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("plan", "nosuchhost"), "no host or group 'nosuchhost'"),
        (("plan", "x", "--facts", "/nonexistent.json"), "/nonexistent.json"),
        (("plan", "host02", "--strategy", "kernel-upgrade"), "not feasible"),
        # every host of a group that cannot take it, not the first alone (review, 2026-12-03)
        (
            ("plan", "gpu_fleet", "--strategy", "kernel-upgrade"),
            "not feasible for 4 of 11 hosts: host02 (already on 5.4.0-150-generic",
        ),
        (("plan", "host01", "--strategy", "reinstall"), "reinstall"),
        (("plan", "host01", "--image", "nvcr.io/nvidia/pytorch:24.04-py3"), "give REF@sha256:<64"),
        # --torch: a release, for cuda-downgrade only, that fits (2026-12-06)
        (("plan", "host01", "--torch", "2.x"), "--torch '2.x': give a torch release"),
        # a user trial (2026-12-06): recorded as 02.5.1, installed as 2.5.1, then refused by apply
        (
            ("plan", "host04", "--torch", "02.5.1", "--strategy", "cuda-downgrade"),
            "--torch '02.5.1': give a torch release",
        ),
        (
            ("plan", "host04", "--torch", "2.5.01", "--strategy", "cuda-downgrade"),
            "--torch '2.5.01': give a torch release",
        ),
        (("plan", "host01", "--torch", ""), "--torch: an empty value"),
        (
            ("plan", "host01", "--torch", "2.5.1", "--strategy", "pcie-acs"),
            "cuda-downgrade, not pcie-acs",
        ),
        (("plan", "host01", "--torch", "2.5.1"), "give --strategy cuda-downgrade"),
        (
            ("plan", "host04", "--torch", "9.9.9", "--strategy", "cuda-downgrade"),
            "torch 9.9.9 (--torch) is not a release the knowledge base records",
        ),
        (("apply", "host04", "--torch", "2.5.1"), "no plan file 'host04'"),
        (
            ("apply", "--strategy", "pcie-acs", "host04", "--torch", "2.5.1"),
            "cuda-downgrade, not pcie-acs",
        ),
        # "" (an unset shell variable) is refused, not read as "not given" (review, 2026-12-03)
        (("plan", "host01", "--facts", ""), "--facts: an empty value"),
        (("plan", "host01", "--probe-verdict", ""), "--probe-verdict: an empty value"),
        (("plan", "host01", "-i", ""), "--inventory: an empty value"),
        (("plan", "host01", "-o", ""), "--output: an empty value"),
        (("facts", "host01", "-o", ""), "--output: an empty value"),
        (("apply", "plan.json", "-i", ""), "--inventory: an empty value"),
        # a user trial (2026-12-06): "" was read as the current directory
        (("apply", ""), "TARGET: an empty value"),
        # the same snapshot under two spellings was compared with itself, exit 0
        (
            (
                "diff",
                "tests/fixtures/hosts/bionic-ga-2x3090.json",
                "./tests/fixtures/hosts/bionic-ga-2x3090.json",
            ),
            "name one host: diff needs two",
        ),
        (("facts", "nosuchhost"), "nosuchhost"),
        (("diff", "host01", "nosuchhost"), "nosuchhost"),
        # a review (2026-12-06): a list with one unknown name ran on the others, exit 0; a typo
        # in an exclusion would have acted on the host it meant to leave out
        (("plan", "host01,host99"), "'host99' matches no host or group"),
        (("plan", "host01:host99"), "'host99' matches no host or group"),
        (("plan", "all,!host0l"), "'!host0l' matches no host or group"),
        (("plan", "host01,web*"), "'web*' matches no host or group"),
        (("diff", "host01,host99", "host02"), "'host99' matches no host or group"),
        (("facts", "host01,host99"), "'host99' matches no host or group"),
        (("plan", "host01", "-o", "no/such/dir/plan.json"), "no/such/dir is not a directory"),
        (("plan",), "Missing argument"),
        # the job's settings: only where a probe runs, and only as data (docs/probe.md)
        (("plan", "host01", "--job-env", "NCCL_ALGO=Tree"), "only with --probe"),
        (("plan", "host01", "--probe", "--job-env", "LD_PRELOAD=/tmp/x.so"), "want VAR=VALUE"),
        (("probe", "host01", "--job-env", "NCCL_DEBUG=INFO"), "the probe sets it"),
        (
            ("apply", "--strategy", "nccl-profile", "host01", "--probe-job-env", "NCCL_X={{1}}"),
            "--probe-job-env 'NCCL_X={{1}}': want VAR=VALUE",  # the option apply spells
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_3(args: tuple[str, ...], needle: str) -> None:
    r = gpufix(*args)
    assert r.returncode == 3, (r.returncode, r.stderr)
    assert needle in one_line_error(r)


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("{not json", "not JSON"),
        ('{"format": "gpufix-facts", "version": 99, "host": "h", "facts": {}}', "version"),
        ('{"format": "something-else", "version": 1}', "format"),
        ('{"format": "x", "format": "gpufix-facts"}', "key 'format' appears twice"),
        (
            '{"format": "gpufix-facts", "version": 1, "host": "h", "gathered_at": "x", "facts": {"os": 1}}',
            "",
        ),
    ],
)
def test_bad_snapshots_are_refused(tmp_path: Path, content: str, needle: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    r = gpufix("plan", "x", "--facts", str(bad))
    assert r.returncode == 3
    assert needle in one_line_error(r)


def test_facts_writes_a_snapshot_that_plans_offline(tmp_path: Path) -> None:
    snap = tmp_path / "h.json"
    assert gpufix("facts", "host03", "-o", str(snap)).returncode == 0
    r = gpufix("plan", "x", "--facts", str(snap), "--json")
    assert json.loads(r.stdout)["plans"][0]["strategy"] == "nccl-profile"  # 4090s have no P2P


def test_diff_puts_differences_first_in_chain_order_with_why() -> None:
    r = gpufix("diff", "host01", "host03", "--json", "--detailed-exitcode")
    assert r.returncode == 2
    doc = json.loads(r.stdout)
    assert doc["format"] == "gpufix-diff" and doc["hosts"] == ["host01", "host03"]
    keys = [d["key"] for d in doc["differences"]]
    assert keys[:3] == ["os", "kernel", "driver_module"]
    assert keys.index("kernel") < keys.index("torch") < keys.index("glibc")
    assert all(d["why"] for d in doc["differences"])
    torch = next(d for d in doc["differences"] if d["key"] == "torch")
    assert torch["values"] == {"host01": "1.12.1+cu113", "host03": "2.1.2+cu121"}


def test_diff_compares_the_python_environments() -> None:
    """python_envs and pythons are compared (IGNORED's "python" is a whole fact, not a prefix)."""
    r = gpufix("diff", "host01", "host05", "--all", "--json")
    paths = [d["path"] for d in json.loads(r.stdout)["all"]]
    assert any(p.startswith("python_envs[") for p in paths)
    assert not any(p == "python" or p.startswith("python.") for p in paths)


@pytest.mark.parametrize("columns", [80, 160])
def test_diff_fits_on_a_screen_and_names_the_differences(columns: int) -> None:
    r = gpufix("diff", "host01", "host02", columns=columns)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) <= 45 and max(map(len, lines)) <= columns
    kernel = next(line for line in lines if line.split()[:2] == ["≠", "kernel"])
    assert "4.15.0-213-generic" in kernel and "5.4.0-150-generic" in kernel
    assert any(line.startswith("  kernel: accelerate warns below 5.5") for line in lines) or (
        "accelerate warns below 5.5" in kernel
    )
    assert "GPU-" not in r.stdout  # UUIDs only with --all
    assert "GPU-" in gpufix("diff", "host01", "host02", "--all").stdout


def test_diff_of_a_group_puts_the_odd_one_out_first() -> None:
    r = gpufix("diff", "bionic", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert set(doc["hosts"]) == {"host01", "host02", "host05", "host09"}
    # host02 (8x A100, HWE kernel, driver 515) differs from the other three on most aspects
    assert doc["hosts"][0] == "host02"


def test_diff_of_a_host_with_itself_is_refused() -> None:
    # A review (2026-12-05): "no differences", exit 0, hid a typo for the second host.
    r = gpufix("diff", "host01", "host01")
    assert r.returncode == 3
    assert r.stderr == "gpufix: error: 'host01', 'host01' name one host: diff needs two or more\n"
    assert gpufix("diff", "host01").returncode == 3


def test_group_plan_leads_with_one_summary_row_per_host() -> None:
    r = gpufix("plan", "gpu_fleet")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "gpufix plan: 11 hosts, 7 with changes"
    assert lines[1].split() == ["host", "strategy", "reboot", "steps", "needs", "key", "findings"]
    row = next(line for line in lines if line.split()[0] == "host09")
    assert row.split()[1:6] == ["driver-pin", "yes", "1", "probe", "error:"]  # no verdict yet
    assert "driver-library-mismatch" in row
    assert len(lines) < 18 and "Decision path" not in r.stdout  # a long row may fold once
    verbose = gpufix("plan", "gpu_fleet", "--verbose").stdout
    assert verbose.startswith(r.stdout.split("details:")[0])
    assert verbose.count("Decision path") == 11


def test_probe_refuses_a_recorded_host() -> None:
    r = gpufix("probe", "host01")
    assert r.returncode == 3
    assert "recorded host" in one_line_error(r)


def test_probe_refuses_soak_sizes_without_soak() -> None:
    """A soak size given without --soak would be ignored in silence: refused, before any host
    is reached, and naming each option given (the defaults are not named)."""
    r = gpufix("probe", "localhost", "--soak-min-bytes", "1K", "--soak-iters", "5")
    assert r.returncode == 3
    assert one_line_error(r).endswith("--soak-min-bytes, --soak-iters: only with --soak")
    r = gpufix("probe", "localhost", "--soak-factor", "2")
    assert one_line_error(r).endswith("--soak-factor: only with --soak")


@pytest.mark.parametrize(("lo", "hi"), [("1G", "1K"), ("0", "8"), ("1K", "17G"), ("2048", "1K")])
def test_probe_refuses_a_soak_sweep_the_program_would_refuse(lo: str, hi: str) -> None:
    """min > max, zero or past 16G: gpufix_probe.py exits 3 on the host, after Ansible copied it
    there; refused here first, before any host is reached."""
    r = gpufix("probe", "localhost", "--soak", "--soak-min-bytes", lo, "--soak-max-bytes", hi)
    assert r.returncode == 3
    assert one_line_error(r).endswith(
        "soak sizes need 0 < --soak-min-bytes <= --soak-max-bytes <= 16G"
    )


def test_probe_refuses_a_soak_factor_that_never_reaches_the_top() -> None:
    """A review: --soak-factor 1 with min < max passed here and was refused on the host."""
    r = gpufix("probe", "localhost", "--soak", "--soak-factor", "1", "--soak-max-bytes", "2K")
    assert r.returncode == 3
    assert one_line_error(r).endswith(
        "--soak-factor 1 never reaches --soak-max-bytes: use a factor above 1"
    )
    from gpufix.probe.options import ProbeOptions, Soak

    ProbeOptions(soak=Soak("1K", "1K", 1)).check()  # min == max: one size, any factor


def test_lint_command_exit_codes_and_sarif(tmp_path: Path) -> None:
    bad = tmp_path / "train.py"
    bad.write_text('import os\nimport torch\nos.environ["CUDA_VISIBLE_DEVICES"] = "0"\n')
    good = tmp_path / "ok.py"
    good.write_text('import os\nos.environ["CUDA_VISIBLE_DEVICES"] = "0"\nimport torch\n')
    assert gpufix("lint", str(good)).returncode == 0
    r = gpufix("lint", "--sarif", str(bad))
    assert r.returncode == 1
    sarif = json.loads(r.stdout)
    assert sarif["version"] == "2.1.0"
    assert (
        sarif["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]["startLine"]
        == 3
    )
    assert gpufix("lint", str(tmp_path / "missing.py")).returncode == 3


def test_preflight_command_on_a_snapshot() -> None:
    r = gpufix("preflight", "--facts", str(HOSTS / "bionic-mismatch.json"), "--json")
    assert r.returncode == 1  # a driver/library mismatch fails the job's preflight
    report = json.loads(r.stdout)
    assert any(c["status"] == "fail" for c in report["checks"])


def test_probe_localhost_without_gpu_is_not_applicable_and_cpu_self_test_is_healthy() -> None:
    r = gpufix("probe", "localhost", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["localhost"]["verdict"] == "not-applicable"
    r = gpufix("probe", "localhost", "--cpu", "--world-size", "2", "--deadline", "60", "--json")
    assert r.returncode == 0, r.stderr
    v = json.loads(r.stdout)["localhost"]
    assert v["verdict"] == "healthy" and v["backend"] == "gloo" and v["world_size"] == 2
    # the program names the machine; gpufix adds the inventory name it probed, which plan binds
    assert v["inventory_host"] == "localhost" and v["host"] == socket.gethostname()


def test_plan_never_writes_over_its_own_input(tmp_path: Path) -> None:
    """A review (2026-12-05): `plan --facts S -o S` replaced the snapshot with the plan."""
    snap = tmp_path / "h.json"
    assert gpufix("facts", "host01", "-o", str(snap)).returncode == 0
    before = snap.read_bytes()
    r = gpufix("plan", "x", "--facts", str(snap), "-o", str(snap))
    assert r.returncode == 3 and "is the input" in one_line_error(r)
    assert snap.read_bytes() == before


@pytest.mark.parametrize("python", ["/usr/bin/perl", "rel/python", "python3; id"])
def test_facts_refuses_what_plan_refuses_as_an_interpreter(python: str) -> None:
    r = gpufix("facts", "localhost", "--python-env", python)
    assert r.returncode == 3 and "--python-env" in one_line_error(r)


def test_output_errors_are_one_line(tmp_path: Path) -> None:
    """A review (2026-12-05): stdout closed or on a full device gave internal errors, and
    `--json` with stdout closed exited 0 with nothing written."""
    base = [sys.executable, "-m", "gpufix", "plan", "host01"]
    for extra in ([], ["--json"]):
        r = subprocess.run(
            [*base, *extra], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            timeout=120, check=False, pass_fds=(), close_fds=True,
            preexec_fn=lambda: os.close(1),
        )  # fmt: skip
        assert r.returncode == 1 and r.stderr == "gpufix: error: standard output is closed\n"
    if Path("/dev/full").exists():
        with open("/dev/full", "w") as full:
            r = subprocess.run(
                base, stdout=full, stderr=subprocess.PIPE, text=True, timeout=120, check=False
            )
        assert r.returncode == 1 and r.stderr == "gpufix: error: No space left on device\n"


@pytest.mark.parametrize("command", ["lint", "preflight"])
def test_lint_and_preflight_name_themselves_in_output_errors(command: str, tmp_path: Path) -> None:
    """They run on their own in CI and job scripts, and every error of theirs says which
    (docs/exit-codes.md); a closed or full stdout said "gpufix: error:" (a review, 2026-12-06)."""
    (tmp_path / "t.py").write_text("x = 1\n")
    argv = [
        sys.executable,
        "-m",
        "gpufix",
        command,
        *([str(tmp_path / "t.py")] * (command == "lint")),
    ]
    r = subprocess.run(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=120,
        check=False, preexec_fn=lambda: os.close(1),
    )  # fmt: skip
    assert r.returncode == 1 and r.stderr == f"gpufix {command}: error: standard output is closed\n"
    if Path("/dev/full").exists():
        with open("/dev/full", "w") as full:
            r = subprocess.run(
                argv, stdout=full, stderr=subprocess.PIPE, text=True, timeout=120, check=False
            )
        assert (
            r.returncode == 1 and r.stderr == f"gpufix {command}: error: No space left on device\n"
        )


def test_a_host_whose_interpreter_is_missing_is_exit_4_with_the_reason(tmp_path: Path) -> None:
    """A review (2026-12-05): Ansible's "you probably need to set the interpreter" was exit 1
    and hid the shell's reason. It is exit 4 (the host's Python cannot be managed), with it."""
    inv = tmp_path / "inv.yml"
    inv.write_text(
        "all:\n  hosts:\n    u3: {ansible_connection: local, "
        "ansible_python_interpreter: /nonexistent/python3}\n"
    )
    r = gpufix("facts", "u3", "-i", str(inv))
    line = one_line_error(r)
    assert r.returncode == 4, r.stderr
    assert "did not run" in line and "/nonexistent/python3: not found" in line


def test_plan_o_on_a_host_without_facts_says_why_and_writes_nothing(tmp_path: Path) -> None:
    """Found running the README's lab without its connection plugin: `plan -o` for a host
    whose facts failed tried to write an empty plan file and said "plans: [] should be
    non-empty" (exit 3). It is the host's failure, with its exit code, and no file."""
    inv = tmp_path / "inv.yml"
    inv.write_text(
        "all:\n  hosts:\n    u3: {ansible_connection: local, "
        "ansible_python_interpreter: /nonexistent/python3}\n"
    )
    out = tmp_path / "plan.json"
    r = gpufix("plan", "u3", "-i", str(inv), "-o", str(out))
    assert r.returncode == 4, r.stderr
    assert r.stderr.splitlines()[-1] == "gpufix: error: no host planned: u3"
    assert "u3: " in r.stderr.splitlines()[0]  # the host's own reason
    assert "should be non-empty" not in r.stderr and not out.exists()


def test_usage_errors_of_lint_and_preflight_name_the_tool() -> None:
    """docs/exit-codes.md: lint and preflight say `gpufix lint: error:` (they also run alone in
    CI and job scripts); an empty --facts is refused, not read as the current directory."""
    r = gpufix("lint", "--bogus")
    assert r.returncode == 3 and r.stderr.startswith("gpufix lint: error: No such option")
    r = gpufix("preflight", "--bogus")
    assert r.returncode == 3 and r.stderr.startswith("gpufix preflight: error: No such option")
    r = gpufix("preflight", "--facts", "")
    assert r.returncode == 3 and "--facts: an empty value" in r.stderr
    assert r.stderr.startswith("gpufix preflight: error:")  # a user trial, 2026-12-06
    # the probe would run here and stand in the snapshot host's report (exit-codes.md: conflict)
    r = gpufix("preflight", "--facts", "tests/fixtures/hosts/bionic-single-gpu.json", "--probe")
    assert r.returncode == 3 and "--facts and --probe" in r.stderr and r.stdout == ""


@pytest.mark.parametrize(
    ("error", "line"),
    [
        (ValueError("while parsing a flow sequence\n  in x.yml, line 1\nexpected ',' or ']'"),
         "gpufix: internal error: ValueError: while parsing a flow sequence in x.yml, line 1 "
         "expected ',' or ']' (GPUFIX_DEBUG=1 shows the traceback)"),
        (GpufixError("h1: refused:\nsee the journal"),
         "gpufix: error: h1: refused: see the journal"),
    ],
)  # fmt: skip
def test_an_error_whose_text_has_newlines_is_still_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], error: Exception, line: str
) -> None:
    """A review (2026-12-05): a YAML parser error from broken content printed four lines."""
    import gpufix.planning
    from gpufix.cli import main

    def broken(*args: object, **kwargs: object) -> None:
        raise error

    monkeypatch.delenv("GPUFIX_DEBUG", raising=False)
    monkeypatch.setattr(gpufix.planning, "make_plans", broken)
    with pytest.raises(SystemExit):
        main(["plan", "host01"])
    assert capsys.readouterr().err == line + "\n"


def test_gpufix_alone_prints_the_help_not_an_error() -> None:
    """A review (2026-12-05): click 8.2 made a bare `gpufix` a usage error, printed as
    `gpufix: error: Usage: ...` with the whole help on stderr and exit 3."""
    r = gpufix()
    assert r.returncode == 0 and r.stderr == ""
    assert r.stdout.startswith("Usage: gpufix") and "plan" in r.stdout


def test_a_plan_file_with_a_chosen_torch_release_runs_only_when_it_is_named_again(
    tmp_path: Path,
) -> None:
    """plan --torch records the release; apply PLANFILE refuses it unless --torch names it again,
    before any host is read (the recorded host's own refusal comes only after that check)."""
    plan = tmp_path / "p.json"
    r = gpufix(
        "plan", "host04", "--strategy", "cuda-downgrade", "--torch", "2.5.1", "-o", str(plan)
    )
    assert r.returncode == 0, r.stderr
    for extra in ((), ("--torch", "2.4.1")):
        r = gpufix("apply", str(plan), "--check", *extra)
        assert r.returncode == 3
        assert "installs torch 2.5.1, a release chosen with --torch" in one_line_error(r)
    r = gpufix("apply", str(plan), "--check", "--torch", "2.5.1")
    assert r.returncode == 3 and "is a recorded snapshot" in one_line_error(r)
