"""gpufix installs and runs the way its users do: a wheel that carries the Ansible content, and
the repository root as the gpufix.fleet collection, usable by fully qualified names."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import tomllib
import yaml

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "controller" / "gpufix"


def test_the_package_list_names_every_package() -> None:
    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    found = {
        ".".join(p.parent.relative_to(ROOT / "controller").parts)
        for p in PACKAGE.rglob("__init__.py")
    }
    assert found | {"gpufix._content"} == listed


def test_collection_metadata_agrees_with_the_project() -> None:
    galaxy = yaml.safe_load((ROOT / "galaxy.yml").read_text())
    runtime = yaml.safe_load((ROOT / "meta" / "runtime.yml").read_text())
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    core = next(d for d in deps if d.startswith("ansible-core"))
    assert (galaxy["namespace"], galaxy["name"]) == ("gpufix", "fleet")
    # the collection claims the ansible-core line the controller pins and the roles are tested on
    assert ">=2.16" in runtime["requires_ansible"] and "<2.17" in runtime["requires_ansible"]
    assert "<2.17" in core
    # collection playbooks are addressed by identifiers: no dashes in their names
    assert all("-" not in p.stem for p in (ROOT / "playbooks").glob("*.yml"))


def _clean_tree(dest: Path) -> Path:
    """The files git would commit (tracked and untracked, not ignored): a build from the
    working tree would pick up a stale build/ folder of another layout."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"],
        cwd=ROOT, capture_output=True, check=True,
    ).stdout.decode().split("\0")  # fmt: skip
    for rel in filter(None, listed):
        src, dst = ROOT / rel, dest / rel
        if not src.exists() and not src.is_symlink():
            continue  # deleted in the working tree, not yet committed
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            dst.symlink_to(os.readlink(src))
        else:
            dst.write_bytes(src.read_bytes())
    return dest


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The wheel, and what its build printed (pip -v shows the build backend's warnings)."""
    out = tmp_path_factory.mktemp("dist")
    src = _clean_tree(tmp_path_factory.mktemp("src"))
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "-w", str(out), str(src)],
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    )
    (whl,) = out.glob("gpufix-*.whl")
    return whl, proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def wheel(built: tuple[Path, str]) -> Path:
    return built[0]


@pytest.mark.slow
def test_the_wheel_builds_without_setuptools_warnings(built: tuple[Path, str]) -> None:
    """Each data folder (roles/*/tasks, inventory, ...) once printed a "Package would be
    ignored" page: the data comes from package-data alone (include-package-data = false)."""
    log = built[1]
    assert "would be ignored" not in log and "is absent from the `packages`" not in log


RUNTIME_DIRS = ("tasks", "handlers", "defaults", "vars", "meta", "templates", "files")


def _runtime_content() -> list[str]:
    """What Ansible reads at run time: the roles' runtime folders, playbooks, plugins, the
    example inventory and the collection's metadata (tracked files)."""
    listed = subprocess.run(
        ["git", "ls-files", "roles", "playbooks", "plugins", "inventory", "meta",
         "ansible.cfg", "galaxy.yml"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    out = []
    for rel in listed:
        if rel.startswith("roles/") and rel.split("/")[2] not in RUNTIME_DIRS:
            continue
        if (ROOT / rel).is_dir():  # inventory/snapshots: a link to the recorded hosts
            out += [f"{rel}/{p.name}" for p in sorted((ROOT / rel).glob("*.json"))]
        else:
            out.append(rel)
    return out


@pytest.mark.slow
def test_wheel_carries_the_ansible_content(wheel: Path) -> None:
    import zipfile

    names = set(zipfile.ZipFile(wheel).namelist())
    for needed in (
        "gpufix/_content/ansible.cfg",
        "gpufix/_content/plugins/modules/gpufix_facts.py",
        "gpufix/_content/plugins/filter/gpufix_kernel.py",
        "gpufix/_content/roles/probe/files/gpufix_probe.py",
        "gpufix/_content/roles/driver/tasks/main.yml",
        "gpufix/_content/playbooks/kernel_upgrade.yml",
        "gpufix/_content/inventory/example.yml",
        "gpufix/_content/inventory/snapshots/bionic-ga-2x3090.json",
        "gpufix/engine/knowledge/driver_branches.yaml",
        "gpufix/workload/lint/libraries.yaml",
        "gpufix/workload/lint/communicators.yaml",
        "gpufix/schemas/facts.schema.json",
    ):
        assert needed in names, needed
    assert not [n for n in names if "__pycache__" in n or n.startswith("gpufix/_content/tests")]
    # every file the roles, playbooks and plugins use at run time, not a sample of them: the
    # ACS boot script (roles/pcie_acs/files/gpufix-pcie-acs) was missing, found by a review
    content = {f"gpufix/_content/{rel}" for rel in _runtime_content()}
    assert content - names == set()
    # every module in the wheel is one of the source tree's (no stale build/ leftovers)
    modules = {n for n in names if n.endswith(".py") and not n.startswith("gpufix/_content/")}
    source = {str(p.relative_to(ROOT / "controller")) for p in PACKAGE.rglob("*.py")}
    assert modules == source, modules ^ source


@pytest.mark.slow
def test_wheel_runs_from_a_fresh_venv_outside_the_checkout(wheel: Path, tmp_path: Path) -> None:
    """What CI checks for pipx users: no GPUFIX_HOME, no checkout, any directory."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)]
    subprocess.run(pip, check=True, capture_output=True, timeout=900)
    env = {k: v for k, v in os.environ.items() if k not in ("GPUFIX_HOME", "ANSIBLE_CONFIG")}
    env["GPUFIX_STATE_DIR"] = str(tmp_path / "state")
    work = tmp_path / "elsewhere"
    work.mkdir()
    gpufix = str(venv / "bin" / "gpufix")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [gpufix, *args], cwd=work, env=env, capture_output=True, text=True, timeout=300
        )

    r = run("plan", "host09")  # a driver/library mismatch: driver-pin
    assert r.returncode == 0, r.stderr
    assert "driver-pin" in r.stdout
    assert run("plan", "host09", "--detailed-exitcode").returncode == 2
    # live facts of this machine through the shipped module and ansible-runner
    r = run("plan", "localhost", "--json")
    assert r.returncode == 0, r.stderr
    assert '"strategy": "none"' in r.stdout  # no NVIDIA GPU here
    # lint reads its tables from the installed package
    (work / "train.py").write_text(
        "import torch\nimport os\nos.environ['CUDA_VISIBLE_DEVICES'] = '1'\n"
    )
    # one GPU pinned before torch, no communicator: the NCCL write is inert (communicators.yaml)
    (work / "gen.py").write_text(
        "import os\nos.environ['CUDA_VISIBLE_DEVICES'] = '1'\n"
        "os.environ['NCCL_P2P_DISABLE'] = '1'\nimport torch\n"
    )
    r = run("lint", "train.py", "gen.py")
    assert r.returncode == 1 and "train.py:3:1: GPF001" in r.stdout, (r.stdout, r.stderr)
    assert "GPF004" not in r.stdout, r.stdout


@pytest.fixture(scope="module")
def collection(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """Build the collection from the repository root and install it into a private path."""
    build = tmp_path_factory.mktemp("build")
    subprocess.run(
        ["ansible-galaxy", "collection", "build", str(ROOT), "--output-path", str(build)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (tarball,) = build.glob("gpufix-fleet-*.tar.gz")
    dest = tmp_path_factory.mktemp("collections")
    subprocess.run(
        ["ansible-galaxy", "collection", "install", str(tarball), "-p", str(dest)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    yield tarball, dest


def test_collection_holds_content_not_the_controller(collection: tuple[Path, Path]) -> None:
    with tarfile.open(collection[0]) as tar:
        names = set(tar.getnames())
    for needed in (
        "MANIFEST.json",
        "meta/runtime.yml",
        "plugins/modules/gpufix_facts.py",
        "plugins/filter/gpufix_kernel.py",
        "roles/nccl_profile/tasks/main.yml",
        "playbooks/nccl_profile.yml",
        "roles/probe/files/gpufix_probe.py",
    ):
        assert needed in names, needed
    for unwanted in ("controller", "tests", "molecule", ".venv", "bench"):
        assert not [n for n in names if n == unwanted or n.startswith(unwanted + "/")], unwanted
    assert not [n for n in names if "__pycache__" in n]


@pytest.mark.integration
def test_installed_collection_runs_by_fqcn_on_a_container(
    collection: tuple[Path, Path], tmp_path: Path
) -> None:
    """A role and the facts module from the installed collection, by fully qualified name,
    with plain ansible-playbook and no gpufix settings, against a real container."""
    from containers import IMAGE, remove, start, unavailable

    if subprocess.run(["podman", "image", "exists", IMAGE], check=False).returncode != 0:
        unavailable(f"{IMAGE} missing (run tests/images/build.sh)")
    coll_path = collection[1]
    name = f"gpufix-coll-{uuid.uuid4().hex[:8]}"
    start(name)
    try:
        inv = tmp_path / "hosts.yml"
        inv.write_text(
            f"all:\n  hosts:\n    {name}:\n      ansible_connection: containers.podman.podman\n"
            "      ansible_python_interpreter: /usr/bin/python3\n"
            "      ansible_become_method: su\n"  # root in the container; no sudo there
        )
        book = tmp_path / "site.yml"
        book.write_text(
            "- hosts: all\n  gather_facts: false\n  tasks:\n"
            "    - name: Facts through the collection's module\n"
            "      gpufix.fleet.gpufix_facts:\n"
            "    - name: A role by its fully qualified name\n"
            "      ansible.builtin.include_role:\n        name: gpufix.fleet.nccl_profile\n"
            "      vars:\n        gpufix_nccl_profile_names: [no-p2p]\n"
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "GPUFIX_"))}
        env["ANSIBLE_COLLECTIONS_PATH"] = os.pathsep.join(
            [str(coll_path), str(ROOT / ".ansible" / "collections")]
        )
        env["ANSIBLE_HOST_KEY_CHECKING"] = "False"
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
        r = subprocess.run(
            ["ansible-playbook", "-i", str(inv), str(book)],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
        conf = subprocess.run(
            ["podman", "exec", name, "cat", "/etc/nccl.conf"], capture_output=True, text=True
        )
        assert "NCCL_P2P_DISABLE=1" in conf.stdout
        # a collection playbook by its FQCN resolves its roles inside the collection
        r = subprocess.run(
            ["ansible-playbook", "-i", str(inv), "gpufix.fleet.nccl_profile",
             "-e", '{"gpufix_nccl_profile_names": ["default"]}'],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    finally:
        remove(name)


def test_controller_playbooks_run_gpufix_from_the_collection(
    collection: tuple[Path, Path], tmp_path: Path
) -> None:
    """The AWX path (docs/awx.md): a job template runs the collection's controller_plan. The
    plan's folder need not exist (docs/awx.md's /var/lib/gpufix/plans/JOB.json), and the job's
    output holds the plan a person approves (a review found an empty job output and a first
    job that failed on the missing folder)."""
    plan = tmp_path / "plans" / "42.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "GPUFIX_"))}
    env["ANSIBLE_COLLECTIONS_PATH"] = str(collection[1])
    env["GPUFIX_STATE_DIR"] = str(tmp_path / "state")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    r = subprocess.run(
        ["ansible-playbook", "gpufix.fleet.controller_plan",
         "-e", "gpufix_target=host01", "-e", "gpufix_strategy=kernel-upgrade",
         "-e", f"gpufix_plan_file={plan}"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    doc = __import__("json").loads(plan.read_text())
    assert [p["strategy"] for p in doc["plans"]] == ["kernel-upgrade"]
    assert oct(plan.parent.stat().st_mode & 0o777) == "0o700"
    for shown in ("gpufix plan for host01", "Strategies considered", "kernel-upgrade"):
        assert shown in r.stdout, r.stdout[-3000:]
    # a target that is not a plain string is refused before gpufix runs
    r = subprocess.run(
        ["ansible-playbook", "gpufix.fleet.controller_plan",
         "-e", '{"gpufix_target": ["a"], "gpufix_plan_file": "/tmp/x.json"}'],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert r.returncode != 0 and "gpufix_target" in r.stdout


def test_versions_agree() -> None:
    from gpufix import __version__

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    galaxy = yaml.safe_load((ROOT / "galaxy.yml").read_text())["version"]
    ee = (ROOT / "execution-environment.yml").read_text()
    assert __version__ == project == galaxy
    assert f"gpufix-{project}-py3-none-any.whl" in ee and f"gpufix-fleet-{galaxy}.tar.gz" in ee


@pytest.mark.slow
def test_execution_environment_definition_builds_a_context(
    wheel: Path, collection: tuple[Path, Path], tmp_path: Path
) -> None:
    """ansible-builder validates the EE file and writes the build context (no image here:
    no registry is reachable)."""
    import shutil

    files = tmp_path / "ee-files"
    files.mkdir()
    shutil.copy(wheel, files)
    shutil.copy(collection[0], files)
    shutil.copy(ROOT / "execution-environment.yml", tmp_path)
    r = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-builder"), "create",
         "-f", "execution-environment.yml", "-c", "context"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    containerfile = (tmp_path / "context" / "Containerfile").read_text()
    assert "GPUFIX_STATE_DIR=/var/lib/gpufix" in containerfile
    assert (tmp_path / "context" / "_build" / "ee-files" / wheel.name).is_file()
