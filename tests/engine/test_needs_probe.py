"""A plan made without a probe verdict says the probe would decide (issue 12, item 7): the
example inventory's host01 (2x RTX 3090, bionic) gets kernel-upgrade from its facts alone."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# A real verdict (the H200 run of docs/gpu-check.md), its readings dropped: not this host's.
H200 = ROOT / "docs" / "device" / "h200-probe-healthy.json"


def _needs(*args: str) -> list[str]:
    r = subprocess.run(
        [sys.executable, "-m", "gpufix", "plan", *args, "--json"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    return [n["id"] for n in json.loads(r.stdout)["plans"][0]["extra"]["needs"]]


def test_no_verdict_needs_the_probe() -> None:
    assert _needs("host01")[0] == "probe"


def test_a_verdict_takes_the_need_away(tmp_path: Path) -> None:
    verdict = json.loads(H200.read_text())
    verdict.update(facts={})
    (tmp_path / "v.json").write_text(json.dumps(verdict))
    needs = _needs("host01", "--probe-verdict", str(tmp_path / "v.json"))
    assert "probe" not in needs


def test_the_commands_name_the_planned_host_when_it_is_a_plain_word() -> None:
    from gpufix.engine.needs import describe

    assert describe(["probe"], "host01")[0]["how"].startswith("run `gpufix probe host01`")
    assert "`gpufix facts gpu-7.lab` with become" in describe(["acs"], "gpu-7.lab")[0]["how"]
    # a name that is not one plain word stays HOST: the text is copied into shells
    for odd in ("", "h1;id", "-rf", "a b", "h[0:3]"):
        assert "`gpufix probe HOST`" in describe(["probe"], odd)[0]["how"]
