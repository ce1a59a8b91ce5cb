"""Issue 15's probe findings, one test each: what a user reads after a bad probe must be true.

- a hung verdict carries an error text (apply's note was "probe verdict hung: " and nothing);
- an `import torch` that stalls is the Python environment, not "gpu-init -> driver-pin";
- `gpufix probe` prints "h1: healthy: ...", not "h1: healthy: healthy: ...";
- `gpufix probe --cpu` with a Python that has no torch says so, not "CUDA initialisation".
"""

from __future__ import annotations

import io
import subprocess
import sys
import venv
from pathlib import Path
from typing import Any

import pytest
from gpufix.probe import run_local, summarize
from gpufix.probe.remote import show

pytest.importorskip("torch", reason="needs torch (CPU build is enough)")

ROOT = Path(__file__).resolve().parents[1]
FAST = [
    "--cpu",
    "--world-size",
    "2",
    "--no-experiments",
    "--phase-deadline",
    "6",
]  # room for pg_init under load
SLOW_IMPORT = ["--import-deadline", "60"]  # import torch takes over 10 s on a loaded machine


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUFIX_PROBE_FAULT")}
    env["TMPDIR"] = str(tmp_path)
    env.update(extra)
    return env


@pytest.mark.slow
def test_hung_verdict_says_who_stalled_where(tmp_path: Path) -> None:
    env = _env(tmp_path, GPUFIX_PROBE_FAULT="stall:barrier:1")
    args = [*FAST, *SLOW_IMPORT, "--no-single-gpu", "--deadline", "60"]
    v = run_local(args=args, env=env, timeout=90)

    assert v["verdict"] == "hung"
    assert v["error"] == (
        "ranks [1] made no progress in barrier for 6.0 s (phase deadline); "
        "ranks [0] were waiting for them"
    )


@pytest.mark.slow
def test_import_torch_stall_is_the_environment_not_the_driver(tmp_path: Path) -> None:
    # A torch whose import never returns (as on a hung NFS mount), found first on PYTHONPATH.
    fake = tmp_path / "hang" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("import time\ntime.sleep(3600)\n")
    env = _env(tmp_path, PYTHONPATH=str(fake.parent))
    v = run_local(args=[*FAST, "--import-deadline", "5", "--deadline", "30"], env=env, timeout=60)

    assert v["verdict"] == "hung" and v["stalled"]["phase"] == "import_torch"
    ids = [c["id"] for c in v["causes"]]
    assert ids == ["torch-import"], ids
    assert v["causes"][0]["strategy"] == "none"
    assert summarize(v).endswith(
        "→ likely the Python environment (import torch stalled or failed), not the driver"
    )


def test_probe_line_names_the_verdict_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpufix.cli import render

    out = io.StringIO()
    real = render.console

    def to_buffer(stderr: bool = False) -> Any:
        c = real(stderr)
        c.file = out
        return c

    monkeypatch.setattr(render, "console", to_buffer)
    verdict = {"verdict": "healthy", "world_size": 2, "backend": "gloo", "duration_s": 4.2}
    show({"h1": verdict})
    assert out.getvalue().strip() == "h1: healthy: 2 ranks (gloo) in 4.2 s"


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Python with no torch: a fresh venv without system site-packages."""
    d = tmp_path_factory.mktemp("notorch")
    venv.EnvBuilder(with_pip=False).create(d)
    return d / "bin" / "python"


def test_cpu_probe_without_torch_says_torch_is_missing(bare_python: Path) -> None:
    proc = subprocess.run(
        [
            str(Path(sys.executable).with_name("gpufix")),
            "probe",
            "localhost",
            "--cpu",
            "--python",
            str(bare_python),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**_env(Path("/tmp")), "NO_COLOR": "1"},
    )
    assert proc.returncode == 5, proc.stderr
    line = proc.stdout.strip()
    assert line.startswith("localhost: failed in import_torch"), line
    assert f"torch is not installed in {bare_python}" in line
    assert "CUDA initialisation" not in line and "driver" not in line
