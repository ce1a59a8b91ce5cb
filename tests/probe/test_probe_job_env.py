"""The job's own settings (--job-env): every run has them, one experiment runs without them.

The fault switch stands in for a setting that breaks the job: `if=VAR=VALUE` makes a stall that
fires only while the worker's environment has that setting, `unless=VAR=VALUE` one that clears
only under it. Real worker processes, real torch on CPU with gloo, as test_probe_experiments.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from conftest import as_recorded_host, probe_env
from gpufix.errors import InvalidInput
from gpufix.probe import run_local, summarize
from gpufix.probe.options import ProbeOptions
from workers import leftovers

ROOT = Path(__file__).resolve().parents[2]
PHASE = 6.0
BASE = ["--cpu", "--no-single-gpu", "--phase-deadline", str(PHASE), "--import-deadline", "60"]


def _ns(**kw: Any) -> argparse.Namespace:
    base = {"no_experiments": False, "experiment": None, "experiments": None}
    base.update({"no_p2p_rerun": False, "nnodes": 1, "job_env": {}})
    base.update(kw)
    return argparse.Namespace(**base)


def test_the_job_settings_come_off_first(prog: types.ModuleType) -> None:
    plan = prog.plan_experiments(_ns(job_env={"NCCL_ALGO": "Tree"}), {}, 2, 2)
    assert plan[0] == "job-env-off"
    assert "job-env-off" not in prog.plan_experiments(_ns(), {}, 2, 2)
    # one rank (a one-GPU host): no knob has a transport to change, the job's settings still do
    assert prog.plan_experiments(_ns(job_env={"NCCL_ALGO": "Tree"}), {}, 1, 1) == ["job-env-off"]
    assert prog.plan_experiments(_ns(), {}, 1, 1) == []


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--job-env", "NCCL_DEBUG=INFO"], "the probe sets it"),
        (["--job-env", "LD_PRELOAD=/tmp/x.so"], "want VAR=VALUE"),
        (["--job-env", "NCCL_ALGO"], "want VAR=VALUE"),
        (["--job-env", "NCCL_ALGO={{ lookup('pipe', 'id') }}"], "characters no setting needs"),
        (["--job-env", "NCCL_ALGO=Ring;id"], "characters no setting needs"),
        (["--job-env", "NCCL_ALGO=Ring", "--job-env", "NCCL_ALGO=Tree"], "given twice"),
        (["--job-env", "NCCL_ALGO=Ring", "--experiment", "job-env-off"], "main run is the one"),
        (["--experiments", "job-env-off"], "needs the job's settings"),
        (
            ["--job-env", "NCCL_ALGO=Ring", "--experiment", "job-env-without-NCCL_ALGO"],
            "main run is the one",
        ),
        (
            ["--job-env", "NCCL_ALGO=Ring", "--experiments", "job-env-without-NCCL_PROTO"],
            "not one of the job's settings",
        ),
        (
            ["--job-env", "NCCL_ALGO=Ring", "--experiments", "job-env-without-LD_PRELOAD"],
            "not one of the job's settings",
        ),
    ],
)
def test_bad_job_settings_are_refused(
    prog: types.ModuleType, capsys: pytest.CaptureFixture[str], args: list[str], words: str
) -> None:
    assert prog.main(["--cpu", *args]) == prog.EXIT_INVALID
    err = capsys.readouterr().err
    assert words in err and len(err.splitlines()) == 1


@pytest.mark.parametrize(
    "item",
    ["NCCL_DEBUG_FILE=/tmp/x", "PATH=/tmp", "NCCL_X=a b", "NCCL_X='a'", "NCCL_X={{1}}", "nccl_x=1"],
)
def test_the_controller_refuses_them_too(item: str) -> None:
    with pytest.raises(InvalidInput) as err:
        ProbeOptions(job_env=(item,)).check()
    assert "\n" not in str(err.value)


def test_the_controller_hands_them_on_as_single_words() -> None:
    opts = ProbeOptions(job_env=("NCCL_SOCKET_IFNAME=^docker0,lo", "CUDA_VISIBLE_DEVICES=0,1"))
    args = opts.check().program_args()
    assert "--job-env=NCCL_SOCKET_IFNAME=^docker0,lo" in args
    assert "--job-env=CUDA_VISIBLE_DEVICES=0,1" in args


@pytest.fixture(scope="module")
def job_verdict(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The host's own environment has NCCL_ALGO=Ring; the job sets Tree, and the stall clears
    only under Ring: the job-env-off run is healthy only if it gets the host's value back (not
    merely the job's value removed), and p2p-off, which keeps the job's settings, hangs."""
    pytest.importorskip("torch", reason="needs torch (CPU build is enough)")
    tmp = tmp_path_factory.mktemp("job-env")
    env = probe_env(tmp, "stall:pg_init:*;unless=NCCL_ALGO=Ring;if=GLOO_TEST_JOB=1")
    env["NCCL_ALGO"] = "Ring"
    args = [*BASE, "--world-size", "2", "--deadline", "90", "--experiment-budget", "200"]
    args += ["--job-env", "NCCL_ALGO=Tree", "--job-env", "GLOO_TEST_JOB=1"]
    v = run_local(args=[*args, "--experiments", "p2p-off,job-env-off"], env=env)
    assert leftovers(str(tmp)) == [], "worker processes left behind"
    return v


@pytest.mark.slow
def test_a_job_setting_that_hangs_is_named(job_verdict: dict[str, Any]) -> None:
    v = job_verdict  # run_local validated it against the probe schema
    assert v["verdict"] == "hung" and v["stalled"]["phase"] == "pg_init"
    assert v["job_env"] == {"NCCL_ALGO": "Tree", "GLOO_TEST_JOB": "1"}
    assert [(e["id"], e["verdict"]) for e in v["experiments"]] == [
        ("p2p-off", "hung"),
        ("job-env-off", "healthy"),
    ]
    assert v["decided_by"] == "job-env-off"
    assert [(c["id"], c["strategy"]) for c in v["causes"]] == [("job-setting", "none")]
    assert any("--job-env" in n and "NCCL_ALGO=Tree" in n for n in v["notes"])
    line = summarize(v)
    assert "with the job's GLOO_TEST_JOB=1 NCCL_ALGO=Tree" in line
    assert line.endswith(
        "healthy with job-env-off (2 experiments) → likely one of the job's own settings (--job-env)"
    )


def _plan(verdict: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    """`gpufix plan --json` on this verdict for a two-GPU bionic host, through the real CLI."""
    path = tmp_path / "v.json"
    facts = ROOT / "tests" / "fixtures" / "hosts" / "bionic-ga-2x3090.json"
    path.write_text(json.dumps(as_recorded_host(verdict, facts)))
    cmd = [sys.executable, "-m", "gpufix", "plan", "x", "--facts", str(facts)]
    r = subprocess.run(
        [*cmd, "--probe-verdict", str(path), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    (plan,) = json.loads(r.stdout)["plans"]
    return dict(plan)


@pytest.mark.slow
def test_plan_changes_nothing_on_the_host_and_names_the_settings(
    job_verdict: dict[str, Any], tmp_path: Path
) -> None:
    plan = _plan(job_verdict, tmp_path)
    assert plan["strategy"] == "none", plan["strategy"]
    decision = plan["extra"]["decision"]
    assert decision["row"] == "job-setting"
    assert decision["job_env"] == ["GLOO_TEST_JOB=1", "NCCL_ALGO=Tree"]
    assert "env.html" in decision["source"]
    assert not plan["steps"] and not plan["reboot_required"]


@pytest.mark.slow
def test_the_settings_reach_a_remote_probe_as_written(tmp_path: Path) -> None:
    """The one-host remote probe runs through ansible.builtin.script (gpufix.runner.run_script):
    a real ansible-runner run hands `^`, `,` and `==` values over unchanged, one argv item each."""
    from gpufix import runner

    script = tmp_path / "argv.py"
    script.write_text("import json, sys\nprint(json.dumps(sys.argv[1:]))\n")
    inv = tmp_path / "inventory.yml"
    inv.write_text(
        "all:\n  hosts:\n    h1:\n      ansible_connection: local\n"
        f"      ansible_python_interpreter: {sys.executable}\n"
    )
    opts = ProbeOptions(job_env=("NCCL_SOCKET_IFNAME=^docker0,lo", "NCCL_IB_HCA==mlx5_0:1"))
    args = opts.check().program_args()
    res = runner.run_script("h1", inv, script, args, executable=sys.executable, timeout=120)
    host = res.hosts["h1"]
    assert host.status == "ok", host.message
    assert json.loads(host.stdout) == args
    assert "--job-env=NCCL_IB_HCA==mlx5_0:1" in args


SAMPLES = [
    "NCCL_ALGO=Ring",
    "NCCL_SOCKET_IFNAME=^docker0,lo",
    "NCCL_IB_HCA==mlx5_0:1",
    "CUDA_VISIBLE_DEVICES=0,1",
    "TORCH_NCCL_BLOCKING_WAIT=1",
    "NCCL_X=",
    "LD_PRELOAD=/tmp/x.so",
    "NCCL_X={{1}}",
    "NCCL_X=a b",
    "NCCL_X=50%",
    "nccl_x=1",
    "NCCL_ALGO",
    "NCCL_" + "A" * 61 + "=1",
    "NCCL_X=" + "1" * 201,
    "NCCL_ALGO=Ring\n",  # Python's `$` matches before a final newline: each copy must not
    "NCCL_NET_PLUGIN=none",  # a plugin by name alone: the system's library path's
    "NCCL_NET_PLUGIN=aws-ofi",
]
# Code from a path the job names, or a file written there, as root (a review, 2026-12-06): the
# probe, the CLI, varspec and the role refuse to run with them; a recorded verdict may still say
# a run had one (the schema describes data about a run)
LOADS = [
    "CUDA_INJECTION64_PATH=/home/alice/x.so",
    "NCCL_NET_PLUGIN=/home/alice/libnccl-net.so",
    "NCCL_TUNER_PLUGIN=/tmp/t.so",
    "NCCL_CONF_FILE=/home/alice/nccl.conf",
    "NCCL_TOPO_DUMP_FILE=/etc/shadow",
    "FI_PROVIDER_PATH=/home/alice/prov",
    "UCX_MODULE_DIR=/home/alice/ucx",
    "TORCH_NCCL_DEBUG_INFO_TEMP_FILE=/etc/passwd",
]
SAMPLES += LOADS


def test_every_copy_of_the_rule_agrees(prog: types.ModuleType) -> None:
    """The program, the CLI, varspec, the role and the verdict schema each check a setting
    (the program runs alone on hosts and imports nothing of gpufix): one answer per sample."""
    import re

    import yaml
    from gpufix import schema_check
    from gpufix.apply.varspec import PATTERNS
    from gpufix.probe.local import schema

    role = yaml.safe_load((ROOT / "roles/probe/vars/main.yml").read_text())
    props = schema()["properties"]["job_env"]
    # as gpufix reads a verdict: ECMA-262 end anchors (gpufix.schema_check)
    name_re = schema_check.validator({"type": "string", **props["propertyNames"]})
    value_re = schema_check.validator(props["additionalProperties"])
    for item in SAMPLES:
        name, _, value = item.partition("=")
        try:
            prog.parse_job_env([item])
            want = True
        except prog.ArgError:
            want = False
        try:
            ProbeOptions(job_env=(item,)).check()
            cli = True
        except InvalidInput:
            cli = False
        answers = {
            "cli": cli,
            "varspec": bool(re.fullmatch(PATTERNS["job_env"], item)),  # as rolevars checks
            "role": bool(re.match(role["_gpufix_probe_job_env_re"], item)),
            "schema": "=" in item and name_re.is_valid(name) and value_re.is_valid(value),
        }
        if item in LOADS:
            assert not want and answers.pop("schema"), item  # refused to run, fine as a record
        assert answers == dict.fromkeys(answers, want), item
    # the experiment that takes one setting off names it in its id (job-env-without-VAR)
    id_re = re.compile(schema()["$defs"]["experiment_id"]["pattern"])
    for item in SAMPLES:
        name = item.partition("=")[0]
        named = bool(prog.JOB_ENV_NAME_RE.match(name))
        assert bool(id_re.match("job-env-without-" + name)) == named, name


@pytest.fixture(scope="module")
def culprit_verdict(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The job sets two things; only GLOO_TEST_B breaks the run (the stall clears only under the
    host's own value). After job-env-off is healthy, each setting comes off alone, in name
    order: without GLOO_TEST_A the run still hangs, without GLOO_TEST_B it is healthy."""
    pytest.importorskip("torch", reason="needs torch (CPU build is enough)")
    tmp = tmp_path_factory.mktemp("job-env-culprit")
    env = probe_env(tmp, "stall:pg_init:*;unless=GLOO_TEST_B=host")
    env["GLOO_TEST_B"] = "host"
    args = [*BASE, "--world-size", "2", "--deadline", "90", "--experiment-budget", "200"]
    args += ["--job-env", "GLOO_TEST_B=job", "--job-env", "GLOO_TEST_A=1"]
    v = run_local(args=args, env=env)
    assert leftovers(str(tmp)) == [], "worker processes left behind"
    return v


@pytest.mark.slow
def test_the_one_setting_that_breaks_the_run_is_found(culprit_verdict: dict[str, Any]) -> None:
    v = culprit_verdict  # run_local validated it against the probe schema
    assert v["verdict"] == "hung"
    assert [(e["id"], e["verdict"]) for e in v["experiments"]] == [
        ("job-env-off", "healthy"),
        ("job-env-without-GLOO_TEST_A", "hung"),
        ("job-env-without-GLOO_TEST_B", "healthy"),
    ]
    assert v["decided_by"] == "job-env-off" and v["job_env_culprit"] == "GLOO_TEST_B"
    assert any("needs the job's GLOO_TEST_B=job to fail here" in n for n in v["notes"])
    assert summarize(v).endswith("→ likely the job's GLOO_TEST_B=job (--job-env)")


@pytest.mark.slow
def test_plan_names_the_culprit(culprit_verdict: dict[str, Any], tmp_path: Path) -> None:
    plan = _plan(culprit_verdict, tmp_path)
    assert plan["strategy"] == "none" and not plan["steps"]
    assert plan["extra"]["decision"]["job_env_culprit"] == "GLOO_TEST_B=job"
    assert any(
        "without GLOO_TEST_B=job alone" in p and "job-env-without-GLOO_TEST_B" in p
        for p in plan["path"]
    ), plan["path"]


@pytest.mark.slow
def test_a_hand_list_runs_the_settings_it_names(tmp_path: Path) -> None:
    """`--experiments job-env-off,job-env-without-VAR`: the listed run comes after job-env-off
    is healthy, and names the culprit."""
    pytest.importorskip("torch", reason="needs torch (CPU build is enough)")
    env = probe_env(tmp_path, "stall:pg_init:*;unless=GLOO_TEST_B=host")
    env["GLOO_TEST_B"] = "host"
    args = [*BASE, "--world-size", "2", "--deadline", "90", "--experiment-budget", "200"]
    args += ["--job-env", "GLOO_TEST_B=job", "--job-env", "GLOO_TEST_A=1"]
    v = run_local(args=[*args, "--experiments", "job-env-off,job-env-without-GLOO_TEST_B"], env=env)
    assert leftovers(str(tmp_path)) == [], "worker processes left behind"
    assert [(e["id"], e["verdict"]) for e in v["experiments"]] == [
        ("job-env-off", "healthy"),
        ("job-env-without-GLOO_TEST_B", "healthy"),
    ]
    assert v["job_env_culprit"] == "GLOO_TEST_B"


def test_settings_that_cannot_change_a_run_are_not_suspects(prog: types.ModuleType) -> None:
    ns = _ns(job_env={"NCCL_ALGO": "Tree", "GLOO_SOCKET_IFNAME": "eth1", "GLOO_X": "1"},
             job_env_saved={"GLOO_X": "1"}, ifname=None)  # fmt: skip
    assert prog.job_setting_matters(ns, "nccl", "NCCL_ALGO")
    assert not prog.job_setting_matters(ns, "gloo", "NCCL_ALGO")  # gloo reads no NCCL setting
    assert not prog.job_setting_matters(ns, "nccl", "GLOO_X")  # the host's own value already
    assert prog.job_setting_matters(ns, "nccl", "GLOO_SOCKET_IFNAME")
    ns.ifname = "eth0"  # --ifname sets the interface in every run
    assert not prog.job_setting_matters(ns, "nccl", "GLOO_SOCKET_IFNAME")


def test_a_cpu_probe_of_one_host_runs_two_ranks() -> None:
    """`gpufix probe HOST --cpu` ran one rank (no collective between processes) while roles/probe
    and the multi-node probe run two (docs review, 2026-12-06); a --world-size still wins."""
    from gpufix.probe.options import ProbeOptions

    args = ProbeOptions(cpu=True).check().program_args()
    assert args[args.index("--world-size") + 1] == "2"
    args = ProbeOptions(cpu=True, world_size=3).check().program_args()
    assert args.count("--world-size") == 1 and args[args.index("--world-size") + 1] == "3"
    assert "--world-size" not in ProbeOptions().check().program_args()


def test_the_lists_of_settings_that_load_code_are_the_programs(prog: types.ModuleType) -> None:
    from gpufix.probe import options

    assert options.JOB_ENV_LOADS == prog.JOB_ENV_LOADS
    assert options.JOB_ENV_PLUGINS == prog.JOB_ENV_PLUGINS
    for name in (*prog.JOB_ENV_LOADS, *prog.JOB_ENV_PLUGINS):
        assert prog.JOB_ENV_NAME_RE.fullmatch(name), name  # each a name the rule would take


def test_the_verdict_copies_refuse_what_would_replace_a_device(
    prog: types.ModuleType, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A review (2026-12-06): --json-out /dev/null replaced the device with a regular file (the
    copy is written by rename), as root on the host."""
    link = tmp_path / "link.json"
    link.symlink_to(tmp_path / "elsewhere.json")
    for target in ("/dev/null", str(link)):
        assert prog.main(["--cpu", "--json-out", target]) == prog.EXIT_INVALID
        err = capsys.readouterr().err
        assert "is not a regular file" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "elsewhere.json").exists()


@pytest.mark.slow
def test_a_stdout_that_cannot_take_the_verdict_loses_not_the_copies(tmp_path: Path) -> None:
    """A review (2026-12-06): stdout full, closed or a broken pipe was a traceback, exit 1 even
    when healthy, and no --json-out. One line on stderr now; the copy and the status stand."""
    pytest.importorskip("torch", reason="needs torch (CPU build is enough)")
    program = ROOT / "roles/probe/files/gpufix_probe.py"
    out = tmp_path / "v.json"
    args = [sys.executable, str(program), "--cpu", "--world-size", "1", "--no-experiments"]
    with open("/dev/full", "w") as full:
        r = subprocess.run(
            [*args, "--json-out", str(out)], stdout=full, stderr=subprocess.PIPE, text=True,
            timeout=300, check=False, cwd=tmp_path,
        )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "cannot write the verdict to stdout" in r.stderr and "Traceback" not in r.stderr
    assert json.loads(out.read_text())["verdict"] == "healthy"


def test_a_job_setting_that_hides_every_gpu_is_a_failure(tmp_path: Path) -> None:
    """A review (2026-12-06): with the job's CUDA_VISIBLE_DEVICES= (or -1) the probe counted
    no GPU and said "not-applicable", exit 0, so `apply --probe-job-env` passed a job that
    would see no GPU. The host's own GPUs (a stand-in nvidia-smi lists two) make it a failure."""
    from gpufix.probe.local import schema
    from gpufix.schema_check import validator

    bindir = tmp_path / "bin"
    bindir.mkdir()
    smi = bindir / "nvidia-smi"
    smi.write_text(
        "#!/bin/sh\necho 'GPU 0: NVIDIA A100 (UUID: GPU-1)'\necho 'GPU 1: NVIDIA A100 (UUID: GPU-2)'\n"
    )
    smi.chmod(0o755)
    env = {**probe_env(tmp_path, ""), "PATH": f"{bindir}:/usr/bin:/bin"}
    program = ROOT / "roles/probe/files/gpufix_probe.py"
    for value in ("", "-1"):
        r = subprocess.run(
            [sys.executable, str(program), "--no-experiments", "--no-single-gpu", "--deadline",
             "30", f"--job-env=CUDA_VISIBLE_DEVICES={value}"],
            capture_output=True, text=True, env=env, timeout=120, check=False, cwd=tmp_path,
        )  # fmt: skip
        v = json.loads(r.stdout)
        assert r.returncode == 1 and v["verdict"] == "failed", (r.stdout, r.stderr)
        assert "hides all 2 GPUs of this host" in v["error"]
        assert not list(validator(schema()).iter_errors(v))


@pytest.mark.parametrize(
    ("value", "words"),
    [("", "a comma-separated list"), (",,", "a comma-separated list"),
     ("p2p-off,,shm-off", "a comma-separated list"), ("p2p-off,p2p-off", "more than once")],
)  # fmt: skip
def test_an_experiment_list_with_an_empty_name_is_refused(
    prog: types.ModuleType, capsys: pytest.CaptureFixture[str], value: str, words: str
) -> None:
    """A review (2026-12-06): `--experiments ''` ran the plan as if no list were given, and
    `,,` said "names  more than once"."""
    assert prog.main(["--cpu", "--experiments", value]) == prog.EXIT_INVALID
    err = capsys.readouterr().err
    assert words in err and len(err.splitlines()) == 1
