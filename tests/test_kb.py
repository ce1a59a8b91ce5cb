"""The knowledge base: known rows pinned to their documents, and the loader refusing bad rows."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from gpufix import versions
from gpufix.engine import kb
from gpufix.errors import GpufixError
from packaging.version import Version

Rows = list[dict[str, Any]]


def _v(text: object) -> Version:
    v = versions.parse(text)
    assert v is not None, text
    return v


@pytest.fixture(scope="module")
def k() -> kb.KnowledgeBase:
    return kb.load()


# --- facts pinned to their documents --------------------------------------------------------


def test_bionic_hwe_stops_at_5_4_below_accelerates_threshold(k: kb.KnowledgeBase) -> None:
    # Ubuntu kernel lifecycle: linux-generic-hwe-18.04 is 5.4; accelerate warns below 5.5.0.
    bionic = k.ubuntu("bionic")
    assert bionic is not None
    assert (bionic.ga_kernel, bionic.hwe_kernel) == ("4.15", "5.4")
    assert bionic.hwe_metapackage == "linux-generic-hwe-18.04"
    assert _v(bionic.hwe_kernel) < _v(k.accelerate_kernel_check.threshold)


@pytest.mark.parametrize(
    ("codename", "version_id", "ga", "hwe", "glibc", "python"),
    [
        ("bionic", "18.04", "4.15", "5.4", "2.27", "3.6"),
        ("focal", "20.04", "5.4", "5.15", "2.31", "3.8"),
        ("jammy", "22.04", "5.15", "6.8", "2.35", "3.10"),
        ("noble", "24.04", "6.8", None, "2.39", "3.12"),
    ],
)
def test_ubuntu_releases(
    k: kb.KnowledgeBase,
    codename: str,
    version_id: str,
    ga: str,
    hwe: str | None,
    glibc: str,
    python: str,
) -> None:
    u = k.ubuntu_by_version(version_id)
    assert u is not None and u.codename == codename
    assert (u.ga_kernel, u.hwe_kernel, u.glibc, u.system_python) == (ga, hwe, glibc, python)


def test_bionic_archive_has_python_37_and_38(k: kb.KnowledgeBase) -> None:
    bionic = k.ubuntu("bionic")
    assert bionic is not None
    assert {"3.6", "3.7", "3.8"} <= set(bionic.pythons_available)


def test_accelerate_threshold_since_0_24_0(k: kb.KnowledgeBase) -> None:
    check = k.accelerate_kernel_check
    assert (check.threshold, check.since_accelerate) == ("5.5.0", "0.24.0")
    assert "accelerate/issues/1929" in check.source


@pytest.mark.parametrize(
    ("cuda", "driver"),
    [
        ("10.1", "418.39"),  # torch 1.8's cu101 (a review, 2026-12-07: offered on driver 384)
        ("10.2", "440.33"),
        ("11.0", "450.51.05"),  # the GA (11.0.2), not the RC's 450.36.06 (issue 11, finding 18)
        ("11.8", "520.61.05"),
        ("12.0", "525.60.13"),
        ("12.1", "530.30.02"),
        ("12.4", "550.54.14"),
        ("12.8", "570.26"),
        ("13.0", "580.65.06"),
        ("13.1", "590.44.01"),  # the 13.2 Update 2 notes' Table 3, GA rows
        ("13.2", "595.45.04"),
    ],
)
def test_cuda_min_driver_from_table_3(k: kb.KnowledgeBase, cuda: str, driver: str) -> None:
    assert k.cuda_min_driver(cuda) == driver
    row = next(t for t in k.cuda_toolkits if t.version == cuda)
    assert "Table 3" in row.source


def test_cuda_min_driver_accepts_full_and_odd_versions(k: kb.KnowledgeBase) -> None:
    assert k.cuda_min_driver("12.1.105") == "530.30.02"
    assert k.cuda_min_driver("V11.8.89") == "520.61.05"
    assert k.cuda_min_driver("12.7") is None  # there is no CUDA 12.7
    assert k.cuda_min_driver("nonsense") is None


def test_cuda_toolkits_cover_10_2_through_13_2(k: kb.KnowledgeBase) -> None:
    have = {t.version for t in k.cuda_toolkits}
    wanted = {
        "10.2",
        *(f"11.{i}" for i in range(9)),
        *(f"12.{i}" for i in (0, 1, 2, 3, 4, 5, 6, 8, 9)),
    }
    assert wanted | {"13.0", "13.1", "13.2"} <= have
    # Each newer toolkit needs at least the driver the older one needed.
    ordered = sorted(k.cuda_toolkits, key=lambda t: _v(t.version))
    drivers = [_v(t.min_driver) for t in ordered]
    assert drivers == sorted(drivers)


@pytest.mark.parametrize(("major", "floor"), [(11, "450.80.02"), ("12", "525.60.13"), (13, "580")])
def test_minor_compat_floors(k: kb.KnowledgeBase, major: object, floor: str) -> None:
    assert k.cuda_minor_compat_floor(major) == floor


def test_minor_compat_floor_from_a_full_version_and_unknown_major(k: kb.KnowledgeBase) -> None:
    assert k.cuda_minor_compat_floor("12.4") == "525.60.13"
    assert k.cuda_minor_compat_floor(10) is None


def test_cuda_packaged_per_release(k: kb.KnowledgeBase) -> None:
    bionic = k.cuda_packaged("bionic")
    assert "11.8" in bionic and "12.0" in bionic
    assert "12.4" not in bionic  # the ubuntu1804 repo stopped at an early 12.x
    assert "13.0" not in k.cuda_packaged("focal")  # CUDA 13.0 dropped Ubuntu 20.04
    assert "13.0" in k.cuda_packaged("jammy")
    assert k.cuda_packaged("xenial") == ()


def test_torch_2_7_needs_glibc_2_28_and_bionic_tops_out_at_2_6(k: kb.KnowledgeBase) -> None:
    t27 = k.torch_release("2.7.1")
    assert t27 is not None and t27.glibc_min == "2.28"
    bionic = k.ubuntu("bionic")
    assert bionic is not None
    glibc = _v(bionic.glibc)
    fits = [
        t
        for t in k.torch_releases
        if any(_v(t.glibc_for(c)) <= glibc for c in t.cuda) and _v(t.python_min) >= _v("3.9")
    ]
    newest = max(fits, key=lambda t: _v(t.version))
    assert newest.version == "2.6.0"
    usable = [c for c in newest.cuda if _v(newest.glibc_for(c)) <= glibc]
    assert usable == ["11.8", "12.4"]


def test_torch_variants_and_python_caps(k: kb.KnowledgeBase) -> None:
    t26 = k.torch_release("2.6.0+cu124")
    assert t26 is not None and t26.cuda == ("11.8", "12.4", "12.6")
    py36 = [t for t in k.torch_releases if t.python_min == "3.6"]
    assert max(py36, key=lambda t: _v(t.version)).version.startswith("1.10")
    py38 = [t for t in k.torch_releases if _v(t.python_min) <= _v("3.8")]
    assert max(py38, key=lambda t: _v(t.version)).version.startswith("2.4")
    for t in k.torch_releases:
        if _v(t.version) < _v("2.6"):
            assert t.glibc_min == "2.17", t.version


def test_transformers_python_caps(k: kb.KnowledgeBase) -> None:
    def newest_for(python: str) -> str:
        ok = [r for r in k.transformers_releases if _v(r.python_min) <= _v(python)]
        return max(ok, key=lambda r: _v(r.version)).version

    assert newest_for("3.6") == "4.18.0"
    assert newest_for("3.8") == "4.46.3"
    assert newest_for("3.9") == "4.57.6"


def test_accelerate_releases_have_torch_floors(k: kb.KnowledgeBase) -> None:
    rows = {r.version: r for r in k.accelerate_releases}
    assert rows["0.24.1"].torch_min == "1.10.0"
    assert rows["1.10.1"].python_min == "3.9"
    # Wheel METADATA on PyPI, read 2026-12-05: 1.11.0 needs Python 3.10; 1.16.0 Python 3.11 and
    # torch 2.6.0; 1.11.0-1.15.0 keep torch>=2.0.0.
    floors = {v: (rows[v].python_min, rows[v].torch_min) for v in ("1.11.0", "1.15.0", "1.16.0")}
    assert floors == {
        "1.11.0": ("3.10", "2.0.0"),
        "1.15.0": ("3.10", "2.0.0"),
        "1.16.0": ("3.11", "2.6.0"),
    }


def test_transformers_5_rows(k: kb.KnowledgeBase) -> None:
    # Wheel METADATA on PyPI, read 2026-12-05 (Requires-Python; torch>= in the torch extra).
    rows = {r.version: (r.python_min, r.torch_min) for r in k.transformers_releases}
    assert rows["4.57.6"] == ("3.9", "2.2")
    assert rows["5.0.0"] == ("3.10", "2.2")
    assert rows["5.25.0"] == ("3.11", "2.6")


@pytest.mark.parametrize(
    ("cc", "arch", "first"),
    [
        ("3.7", "Kepler", "5.0"),
        ("7.0", "Volta", "9.0"),
        ("7.5", "Turing", "10.0"),
        ("8.6", "Ampere", "11.1"),
        ("8.9", "Ada", "11.8"),
        ("9.0", "Hopper", "11.8"),
        ("10.0", "Blackwell", "12.8"),
        ("12.0", "Blackwell", "12.8"),
    ],
)
def test_gpu_archs(k: kb.KnowledgeBase, cc: str, arch: str, first: str) -> None:
    found = k.arch_for_cc(cc)
    assert found is not None and found.name == arch
    assert k.first_cuda_for_cc(cc) == first


def test_kepler_dropped_in_cuda_12_and_unknown_cc(k: kb.KnowledgeBase) -> None:
    kepler = k.arch_for_cc("3.5")
    assert kepler is not None and kepler.last_cuda == "11.8"
    assert k.arch_for_cc("99.9") is None
    assert k.first_cuda_for_cc("nonsense") is None


def test_driver_branches(k: kb.KnowledgeBase) -> None:
    have = {b.branch for b in k.driver_branches}
    assert {470, 510, 515, 525, 535, 545, 550, 555, 560, 565, 570, 575, 580, 595, 620} <= have
    r535 = k.driver_branch("535.183.01")
    assert r535 is not None and r535.kind == "lts"
    r545 = k.driver_branch(545)
    assert r545 is not None and r545.kind == "new-feature"


# NVIDIA's "Supported Drivers and CUDA Toolkit Versions", Table 2 (the 615 and 620 pages).
@pytest.mark.parametrize(
    ("branch", "kind", "eol", "checked"),
    [
        (535, "lts", "2026-06", "2026-11-30"),
        (570, "production", "2026-02", "2026-11-30"),
        (580, "lts", "2028-06", "2026-12-06"),
        (595, "production", "2027-03", "2026-12-05"),
        (620, "lts", "2029-09", "2026-11-30"),
    ],
)
def test_driver_branch_support_ends(
    k: kb.KnowledgeBase, branch: int, kind: str, eol: str, checked: str
) -> None:
    row = k.driver_branch(branch)
    assert row is not None and (row.kind, row.eol) == (kind, eol)
    assert row.checked == checked


def test_new_feature_branches_carry_no_end_date(k: kb.KnowledgeBase) -> None:
    """NVIDIA's 620 page: "New Feature Branches are short-lived and do not have an end-of-life
    date". A month an older table gave (R440: 2021 PDF; R610: the 615 page) stays in the note."""
    for row in k.driver_branches:
        if row.kind == "new-feature":
            assert row.eol is None, row.branch
    r610, r615 = k.driver_branch(610), k.driver_branch("615.12.01")
    assert r610 is not None and "August 2026" in (r610.note or "") and "/615/" in r610.source
    assert r615 is not None and (r615.kind, r615.open_modules) == ("new-feature", True)
    assert r615.checked == "2026-12-05" and "/615/" in r615.source and "/620/" in r615.source


def test_days_left_to_the_end_of_support(k: kb.KnowledgeBase) -> None:
    from datetime import date

    r595 = k.driver_branch(595)
    assert r595 is not None
    assert r595.days_left(date(2027, 3, 31)) == 0  # supported through the end of the month
    assert r595.days_left(date(2026, 12, 5)) == 116
    assert r595.days_left(date(2027, 4, 1)) == -1
    assert k.driver_branch(615).days_left(date(2026, 12, 5)) is None  # type: ignore[union-attr]


def test_supported_on_a_plan_date(k: kb.KnowledgeBase) -> None:
    from datetime import date

    def supported(day: date) -> list[int]:
        return [b.branch for b in k.driver_branches if b.supported_on(day)]

    assert supported(date(2026, 11, 30)) == [580, 595, 620]
    # Supported through the end of the EOL month, not a day longer.
    assert 535 in supported(date(2026, 6, 30)) and 535 not in supported(date(2026, 7, 1))
    # New-feature branches are never a target, even inside a dated window.
    assert 610 not in supported(date(2026, 7, 1))
    assert k.checked() == date(2026, 12, 6)  # the newest row check (driver_branches.yaml)


def test_archive_membership_has_one_home(k: kb.KnowledgeBase) -> None:
    """driver_branches.yaml says what NVIDIA supports; which archive carries a branch lives only
    in ubuntu_driver_packages.yaml (the two used to disagree on 575-server)."""
    assert not hasattr(k.driver_branches[0], "ubuntu_server_package")
    noble = {p.origin: p for p in k.ubuntu_driver_packages("noble")}
    jammy = {p.origin: p for p in k.ubuntu_driver_packages("jammy")}
    # 575-server is a full driver in noble; in jammy it depends on 580-server (LP: #2120171).
    assert 575 in noble["ubuntu"].server_branches and 575 not in jammy["ubuntu"].server_branches
    assert 580 in jammy["ubuntu"].server_branches


SPECS = Path(__file__).resolve().parent / "fixtures" / "aptrepo" / "specs"
_DRIVER_TEMPLATES = ("ubuntu-driver", "ubuntu-driver-vp", "ubuntu-driver-open")


def _archive_specs() -> list[Path]:
    return sorted(p for p in SPECS.glob("nvidia-ubuntu-*.yml") if "snapshot" not in p.name)


def test_every_release_has_an_archive_spec() -> None:
    assert {p.stem.removeprefix("nvidia-ubuntu-") for p in _archive_specs()} == {
        "bionic", "focal", "jammy", "noble",
    }  # fmt: skip


@pytest.mark.parametrize("spec", _archive_specs(), ids=lambda p: p.stem)
def test_archive_spec_and_knowledge_base_agree(k: kb.KnowledgeBase, spec: Path) -> None:
    """The fixture archive of a release (specs/nvidia-ubuntu-<codename>.yml) and the knowledge
    base's row for it say the same thing about every branch the spec carries: a full driver is
    installable in that flavour; a transitional nvidia-driver-OLD (Depends on NEW) is not offered
    as the desktop flavour (the engine installs -server for a branch in server_branches)."""
    codename = spec.stem.removeprefix("nvidia-ubuntu-")
    (row,) = [p for p in k.ubuntu_driver_packages(codename) if p.origin == "ubuntu"]
    packages = yaml.safe_load(spec.read_text())["packages"]
    wrong = []
    for pkg in packages:
        use, vars_ = pkg.get("use"), pkg.get("vars", {})
        if use in _DRIVER_TEMPLATES:
            branch, server = int(vars_["B"]), vars_.get("S") == "-server"
            if branch not in row.branches:
                wrong.append(f"R{branch} installable in the spec, not in the KB's branches")
            if server and branch not in row.server_branches:
                wrong.append(f"R{branch}-server installable in the spec, not in server_branches")
        elif use == "ubuntu-transitional":
            old = int(vars_["OLD"])
            if old in row.branches and old not in row.server_branches:
                wrong.append(f"R{old} is transitional in the spec, installable desktop in the KB")
    assert not wrong, f"{codename}: {wrong}"
    assert any(p.get("use") in _DRIVER_TEMPLATES for p in packages), "spec carries no driver"


@pytest.mark.parametrize(
    ("cc", "last", "modules"),
    [
        ("3.7", 470, "proprietary"),
        ("5.2", 580, "proprietary"),
        ("6.1", 580, "proprietary"),
        ("7.0", 580, "proprietary"),
        ("7.5", None, "either"),
        ("9.0", None, "either"),
        ("12.0", None, "open"),
    ],
)
def test_driver_branches_per_architecture(
    k: kb.KnowledgeBase, cc: str, last: int | None, modules: str
) -> None:
    """NVIDIA's CUDA Toolkit, Driver, and Architecture Matrix: Kepler ends at R470, Maxwell/
    Pascal/Volta at R580; Blackwell needs >= R570 and the open modules."""
    arch = k.arch_for_cc(cc)
    assert arch is not None
    assert (arch.last_driver_branch, arch.kernel_modules) == (last, modules)


def test_blackwell_first_branch_is_570(k: kb.KnowledgeBase) -> None:
    arch = k.arch_for_cc("12.0")
    assert arch is not None and k.first_driver_branch(arch) == 570


@pytest.mark.parametrize(
    ("torch", "cuda", "cc", "runs"),
    [
        ("2.8.0", "12.8", "6.1", False),  # cu128 dropped Maxwell/Pascal in 2.8
        ("2.8.0", "12.8", "7.0", True),  # and kept Volta
        ("2.11.0", "12.8", "7.0", False),  # until 2.11
        ("2.9.0", "12.6", "6.0", True),  # cu126 keeps them
        ("2.9.0", "12.6", "6.1", True),  # an sm_60 cubin runs on 6.1
        ("2.9.0", "13.0", "7.0", False),  # CUDA 13 builds start at Turing
        ("2.9.0", "13.0", "12.1", True),  # PTX for 12.0 JIT-compiles on newer Blackwell
        ("2.6.0", "12.4", "12.0", False),  # no Blackwell before CUDA 12.8
        ("2.7.1", "12.8", "6.1", False),
        ("2.7.1", "11.8", "3.7", True),
    ],
)
def test_torch_build_architectures(
    k: kb.KnowledgeBase, torch: str, cuda: str, cc: str, runs: bool
) -> None:
    build = k.torch_build(torch, cuda)
    assert build is not None
    assert build.runs_on(cc) is runs


def test_torch_build_unknown(k: kb.KnowledgeBase) -> None:
    assert k.torch_build("1.8.1", "10.2") is None
    assert k.torch_build(None, "12.8") is None
    assert k.torch_build("2.8.0", "12.8").runs_on("x") is None  # type: ignore[union-attr]


def test_gpus_without_p2p(k: kb.KnowledgeBase) -> None:
    assert k.gpu_p2p_capable("NVIDIA GeForce RTX 4090") is False
    assert k.gpu_p2p_capable("NVIDIA GeForce RTX 4080 SUPER") is False
    assert k.gpu_p2p_capable("RTX 4090") is False
    assert k.gpu_p2p_capable("NVIDIA A100-SXM4-80GB") is None
    # workstation Ada cards are not GeForce 40 cards
    assert k.gpu_p2p_capable("NVIDIA RTX 4000 Ada Generation") is None
    assert k.gpu_p2p_capable("NVIDIA RTX 6000 Ada Generation") is None


@pytest.mark.parametrize(
    ("name", "cc"),
    [
        # rows added 2026-12-04 from NVIDIA's CUDA GPUs page
        ("NVIDIA GeForce RTX 5060", "12.0"),
        ("NVIDIA GeForce RTX 5060 Ti", "12.0"),  # "RTX 5060" then a space: same row
        ("RTX5060Ti", "12.0"),  # a report's spelling, spaced by kb.gpu_name
        ("NVIDIA GeForce RTX 5050", "12.0"),
        ("NVIDIA RTX A2000", "8.6"),
        ("NVIDIA RTX A2000 12GB", "8.6"),  # "RTX A2000", longer than "A2", wins
        # models the page does not list (or the stored copy did not show): no row takes them
        ("NVIDIA L20", None),  # not L4, not L40
        ("NVIDIA RTX A4500", None),  # not A40, not RTX A4000
        ("Quadro RTX 4000", None),  # not RTX 4000 Ada, not Quadro RTX 5000
        ("NVIDIA GeForce RTX 3050", None),
        ("NVIDIA GeForce RTX 2060 SUPER", None),
        ("A2000", None),  # a bare A2000 is not A2 (a digit follows)
        # existing rows resolve as before
        ("NVIDIA A2", "8.6"),
        ("NVIDIA RTX 4000 Ada Generation", "8.9"),
        ("NVIDIA RTX 4000 SFF Ada Generation", "8.9"),
        ("Quadro RTX 5000", "7.5"),
        ("NVIDIA GeForce RTX 5070 Ti", "12.0"),
        ("NVIDIA GeForce RTX 5090", "12.0"),
        ("NVIDIA GeForce RTX 4060 Ti", "8.9"),
        ("NVIDIA GeForce RTX 3060", "8.6"),
        ("NVIDIA RTX A4000", "8.6"),
        ("NVIDIA L40S", "8.9"),
        ("NVIDIA L4", "8.9"),
        ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "12.0"),
    ],
)
def test_gpu_model_rows_and_their_longest_match(
    k: kb.KnowledgeBase, name: str, cc: str | None
) -> None:
    assert k.compute_capability_of(name) == cc


def test_new_gpu_model_rows_cite_nvidias_page(k: kb.KnowledgeBase) -> None:
    rows = {r.match: r for r in k.gpu_models}
    for match in ("RTX 5060", "RTX 5050", "RTX A2000"):
        assert rows[match].source == "https://developer.nvidia.com/cuda-gpus (read 2026-12-04)"


# A row of the documented shape (a made-up range inside R545, fixed on R535 per its `fix`).
_ISSUE = {
    "id": "example",
    "affected": ">=545,<545.29.06",
    "fixed_in": "545.29.06",
    "symptom": "a multi-GPU hang",
    "shows": ["stall:collective"],
    "fix": "downgrade",
    "good_branches": [535],
    "source": "NVIDIA driver release notes (example)",
}


def test_driver_issues_match_driver_versions() -> None:
    row = {**_ISSUE, "good_branches": (535,), "shows": ("stall:collective",)}
    issue = kb.DriverIssue(**row)  # type: ignore[arg-type]
    assert issue.matches("545.23.08") is True
    assert issue.matches("1:545.23.08-0ubuntu1") is True
    assert issue.matches("545.29.06") is False
    assert issue.matches("535.154.05") is False
    assert issue.matches("garbage") is None


def test_driver_issue_platform_condition() -> None:
    base = {**_ISSUE, "good_branches": (535,), "shows": ("stall:collective",)}
    anywhere = kb.DriverIssue(**base)  # type: ignore[arg-type]
    assert anywhere.holds_on(False, ()) and anywhere.holds_on(True, ("Ampere",))
    hgx_h100 = kb.DriverIssue(**base, nvswitch=True, archs=("Hopper",))  # type: ignore[arg-type]
    assert hgx_h100.holds_on(True, ("Hopper",))
    assert not hgx_h100.holds_on(False, ("Hopper",))  # H100 PCIe, no NVSwitch
    assert not hgx_h100.holds_on(True, ("Ampere",))  # HGX A100
    assert not hgx_h100.holds_on(True, ())  # GPUs nobody read: unknown is not a match


def test_no_row_cites_a_corpus_thread(k: kb.KnowledgeBase) -> None:
    """Rules rest on documentation; a corpus thread cited by a rule would score itself (issue 12)."""
    corpus = yaml.safe_load((Path(__file__).parent / "corpus" / "cases.yaml").read_text())
    threads = {str(c["source"]).rstrip("/") for c in corpus}
    for f in Path(kb.DEFAULT_DIR).glob("*.yaml"):
        for row in yaml.safe_load(f.read_text()) or []:
            cited = {t for t in threads if t in str(row.get("source", ""))}
            assert not cited, f"{f.name}: {row.get('id') or row.get('name')} cites {cited}"


def _release_note_source(source: str) -> bool:
    """A driver_issues source: NVIDIA's driver release notes, naming the section it quotes."""
    return (
        ("docs.nvidia.com/datacenter/tesla/" in source or "nvidia.com/en-us/drivers/" in source)
        and ("Known Issues" in source or "Fixed Issues" in source)
        and "github.com" not in source
    )


def test_driver_issue_rows_cite_a_release_note_section(k: kb.KnowledgeBase) -> None:
    """Only NVIDIA's release notes may add a driver range (issue 12), never a thread."""
    assert not _release_note_source("https://github.com/NVIDIA/nccl/issues/1 (Known Issues)")
    assert not _release_note_source("https://docs.nvidia.com/datacenter/tesla/x/index.html")
    assert _release_note_source(
        "https://docs.nvidia.com/datacenter/tesla/tesla-release-notes-535-183-06/index.html "
        "(1.2. Fixed Issues)"
    )
    for issue in k.driver_issues:
        assert _release_note_source(issue.source), f"{issue.id}: {issue.source}"


def test_ubuntu_driver_packages(k: kb.KnowledgeBase) -> None:
    jammy = {p.origin: p for p in k.ubuntu_driver_packages("jammy")}
    assert set(jammy) == {"ubuntu", "nvidia"}
    assert 535 in jammy["ubuntu"].server_branches
    assert k.ubuntu_driver_packages("xenial") == ()


def test_container_images_never_carry_invented_digests(k: kb.KnowledgeBase) -> None:
    assert k.container_images
    for image in k.container_images:
        assert image.ref.startswith("nvcr.io/nvidia/pytorch:")
        assert image.digest is None or image.digest.startswith("sha256:")
        if image.digest is None:
            assert image.note


def test_nccl_profiles(k: kb.KnowledgeBase) -> None:
    names = {p.name for p in k.nccl_profiles}
    # The nccl_profile role's catalogue uses these names (one list: issue 11, finding 17).
    assert names == {
        "default",
        "p2p-level-pxb",
        "no-p2p",
        "ib-off",
        "socket-ifname",
        "shm-off",
        "cumem-off",
        "nvls-off",
        "proto-simple",
        "algo-ring",
        "pxn-off",
        "gdr-off",
        "mnnvl-off",
        "debug",
    }
    default = k.nccl_profile("default")
    assert default is not None and dict(default.settings) == {}
    no_p2p = k.nccl_profile("no-p2p")
    assert no_p2p is not None and dict(no_p2p.settings) == {"NCCL_P2P_DISABLE": "1"}
    assert "bandwidth" in no_p2p.cost
    # Debug knobs live only in the profile marked debug.
    for p in k.nccl_profiles:
        has_debug = any(key.startswith("NCCL_DEBUG") for key in p.settings)
        assert has_debug == p.debug, p.name


def test_every_row_has_a_source(k: kb.KnowledgeBase) -> None:
    tables: list[tuple[Any, ...]] = [
        k.ubuntu_releases,
        (k.accelerate_kernel_check,),
        k.cuda_toolkits,
        k.cuda_minor_compat,
        k.cuda_packaged_rows,
        k.torch_releases,
        k.transformers_releases,
        k.accelerate_releases,
        k.gpu_archs,
        k.gpu_p2p,
        k.torch_builds,
        k.driver_branches,
        k.driver_package_rows,
        k.container_images,
        k.nccl_profiles,
        k.error_signatures,
        k.evidence_fixes,
        k.nccl_issues,
        k.nccl_knobs,
        k.torch_nccl,
    ]
    for table in tables:
        assert table
        for row in table:
            assert row.source.strip(), row


def test_rows_are_frozen(k: kb.KnowledgeBase) -> None:
    with pytest.raises(AttributeError):
        k.cuda_toolkits[0].min_driver = "1"  # type: ignore[misc]
    profile = k.nccl_profile("no-p2p")
    assert profile is not None
    with pytest.raises(TypeError):
        profile.settings["NCCL_P2P_DISABLE"] = "0"  # type: ignore[index]


def test_load_is_cached_and_digest_is_stable(k: kb.KnowledgeBase, tmp_path: Path) -> None:
    assert kb.load() is k
    assert len(k.digest) == 64
    copy = tmp_path / "knowledge"
    shutil.copytree(kb.DEFAULT_DIR, copy)
    assert kb.load(copy).digest == k.digest


# --- the loader refuses bad data ------------------------------------------------------------


def _copy_with(tmp_path: Path, table: str, edit: Callable[[Rows], Rows]) -> Path:
    """A copy of the shipped knowledge with one table's rows passed through `edit`."""
    d = tmp_path / "knowledge"
    shutil.copytree(kb.DEFAULT_DIR, d)
    path = d / f"{table}.yaml"
    rows = yaml.safe_load(path.read_text())
    path.write_text(yaml.safe_dump(edit(rows), sort_keys=False))
    return d


def _first_row(change: Callable[[dict[str, Any]], object]) -> Callable[[Rows], Rows]:
    def edit(rows: Rows) -> Rows:
        change(rows[0])
        return rows

    return edit


def _refused(directory: Path) -> str:
    with pytest.raises(GpufixError) as e:
        kb.load(directory)
    message = str(e.value)
    assert "\n" not in message
    return message


def test_refuses_a_row_without_source(tmp_path: Path) -> None:
    d = _copy_with(tmp_path, "cuda_toolkits", _first_row(lambda r: r.pop("source")))
    message = _refused(d)
    assert "cuda_toolkits.yaml row 1 (10.2)" in message and "source" in message


def test_refuses_an_empty_source(tmp_path: Path) -> None:
    d = _copy_with(tmp_path, "ubuntu", _first_row(lambda r: r.update(source="  ")))
    assert "ubuntu.yaml row 1 (bionic)" in _refused(d)


def test_refuses_a_malformed_version(tmp_path: Path) -> None:
    d = _copy_with(tmp_path, "cuda_toolkits", _first_row(lambda r: r.update(min_driver="440.x")))
    message = _refused(d)
    assert "cuda_toolkits.yaml row 1 (10.2)" in message and "malformed version" in message


def test_refuses_an_unquoted_float_version(tmp_path: Path) -> None:
    # YAML turns 12.10 into 12.1; the loader insists on strings so that cannot slip through.
    d = _copy_with(tmp_path, "cuda_toolkits", _first_row(lambda r: r.update(version=12.1)))
    assert "quoted version" in _refused(d)


def test_refuses_an_unknown_key(tmp_path: Path) -> None:
    d = _copy_with(tmp_path, "driver_branches", _first_row(lambda r: r.update(vendor="x")))
    message = _refused(d)
    assert "driver_branches.yaml row 1 (418)" in message and "unknown key 'vendor'" in message


def test_refuses_a_missing_key(tmp_path: Path) -> None:
    d = _copy_with(tmp_path, "torch_releases", _first_row(lambda r: r.pop("glibc_min")))
    assert "missing key 'glibc_min'" in _refused(d)


def _issue(**change: object) -> Callable[[Rows], Rows]:
    return lambda rows: [*(rows or []), {**_ISSUE, **change}]


def test_refuses_a_bad_specifier_and_choice(tmp_path: Path) -> None:
    d = _copy_with(tmp_path, "driver_issues", _issue(affected="545-550"))
    assert "malformed version specifier" in _refused(d)
    d2 = _copy_with(tmp_path / "b", "driver_issues", _issue(fix="pray"))
    assert "must be one of upgrade, downgrade" in _refused(d2)


def test_a_documented_driver_issue_loads(tmp_path: Path) -> None:
    k = kb.load(_copy_with(tmp_path, "driver_issues", _issue()))
    assert [i.id for i in k.driver_issues][-1] == "example"


def test_refuses_an_invented_looking_digest(tmp_path: Path) -> None:
    d = _copy_with(tmp_path, "container_images", _first_row(lambda r: r.update(digest="abc")))
    assert "sha256 digest" in _refused(d)


def test_refuses_duplicates_and_dangling_references(tmp_path: Path) -> None:
    d = _copy_with(tmp_path, "cuda_toolkits", lambda rows: [*rows, rows[0]])
    assert "duplicate version '10.2'" in _refused(d)
    d2 = _copy_with(tmp_path / "b", "driver_issues", _issue(good_branches=[999]))
    assert "good branch 999" in _refused(d2)
    d3 = _copy_with(tmp_path / "c", "cuda_packaged", _first_row(lambda r: r.update(codename="xx")))
    assert "unknown codename 'xx'" in _refused(d3)


def test_refuses_broken_files(tmp_path: Path) -> None:
    d = tmp_path / "knowledge"
    shutil.copytree(kb.DEFAULT_DIR, d)
    (d / "gpu_archs.yaml").write_text("- name: [unclosed\n")
    assert "gpu_archs.yaml is not valid YAML" in _refused(d)
    (d / "gpu_archs.yaml").write_text("{}\n")
    assert "must be a non-empty list" in _refused(tmp_path / "knowledge")


def test_refuses_missing_and_unknown_tables(tmp_path: Path) -> None:
    d = tmp_path / "a"
    shutil.copytree(kb.DEFAULT_DIR, d)
    (d / "nccl_profiles.yaml").unlink()
    assert "nccl_profiles.yaml is missing" in _refused(d)
    d2 = tmp_path / "b"
    shutil.copytree(kb.DEFAULT_DIR, d2)
    (d2 / "rumours.yaml").write_text("- source: x\n")
    assert "rumours.yaml is not a known table" in _refused(d2)
    assert "is not a directory" in _refused(tmp_path / "nowhere")


def test_digest_changes_with_the_data(k: kb.KnowledgeBase, tmp_path: Path) -> None:
    d = _copy_with(tmp_path, "nccl_profiles", _first_row(lambda r: r.update(cost="changed")))
    assert kb.load(d).digest != k.digest


def test_refuses_a_last_driver_branch_that_is_not_a_branch(tmp_path: Path) -> None:
    d = _copy_with(tmp_path, "gpu_archs", _first_row(lambda r: r.update(last_driver_branch=471)))
    assert "last driver branch 471 is not in driver_branches.yaml" in _refused(d)


def test_refuses_a_bad_checked_date_and_eol_month(tmp_path: Path) -> None:
    d = _copy_with(tmp_path, "driver_branches", _first_row(lambda r: r.update(checked="Nov 2026")))
    assert "checked malformed date" in _refused(d)
    d2 = _copy_with(
        tmp_path / "b", "driver_branches", _first_row(lambda r: r.update(eol="2026-13"))
    )
    assert "eol malformed year-month" in _refused(d2)


def test_torch_wheels_pin_their_nccl(k: kb.KnowledgeBase) -> None:
    # PyPI METADATA of each release's default wheel: Requires-Dist nvidia-nccl-cuXX==V.
    pins = {"2.1.2+cu121": "2.18.1", "2.2.0": "2.19.3", "2.3.1": "2.20.5", "2.6.0": "2.21.5"}
    pins |= {"2.7.0": "2.26.2", "2.8.0": "2.27.3", "2.12.0": "2.29.7"}
    for torch, nccl in pins.items():
        row = k.torch_nccl_version(torch)
        assert row is not None and row.nccl == nccl, torch
    assert k.torch_nccl_version("1.13.1") is None  # not recorded: unknown, not guessed
    assert k.torch_nccl_version("2.11.0").package == "nvidia-nccl-cu13"  # type: ignore[union-attr]


def test_every_torch_2_release_the_engine_may_choose_knows_its_nccl(k: kb.KnowledgeBase) -> None:
    """A stack move up for an NCCL fix must know the NCCL it lands on (1.x wheels are older
    than the NCCL table and are never chosen for a fix)."""
    for row in k.torch_releases:
        if int(row.version.split(".")[0]) >= 2:
            assert k.torch_nccl_version(row.version) is not None, row.version


def test_nccl_issues_name_their_fixed_release(k: kb.KnowledgeBase) -> None:
    # NVIDIA/nccl release commits: 2.21.5-1 "Fix hang when crossNic is inconsistent between ranks".
    crossnic = next(i for i in k.nccl_issues if i.id == "crossnic-hang")
    assert crossnic.matches("2.20.5") is True and crossnic.matches("2.21.5") is False
    assert crossnic.matches("not-a-version") is None
    for issue in k.nccl_issues:
        assert issue.matches(issue.fixed_in) is False, issue.id


def test_branches_older_than_r470_have_their_end_of_life(k: kb.KnowledgeBase) -> None:
    """NVIDIA's 2021 support table (R418, R440, R450, R455, R460): without rows a host on R450,
    which Ubuntu still packages, got no driver-branch-unsupported warning (review, 2026-12-03)."""
    from datetime import date

    rows = {b.branch: b for b in k.driver_branches}
    assert {418, 440, 450, 455, 460} <= set(rows)
    assert rows[450].supported_on(date(2023, 7, 31)) and not rows[450].supported_on(
        date(2023, 8, 1)
    )
    assert not any(rows[b].supported_on(date(2026, 12, 3)) for b in (418, 440, 450, 455, 460))
