"""The knowledge base: sourced facts in knowledge/*.yaml, validated and queried in one place.

Every row names its `source`; a row without one, with a malformed version or with an unknown key
stops the load with one line naming the file and the row.
"""

from __future__ import annotations

import calendar
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml
from packaging.specifiers import SpecifierSet

from gpufix import versions
from gpufix.engine import kb_evidence
from gpufix.engine import kbcheck as c
from gpufix.engine.kb_evidence import (
    ErrorSignature,
    EvidenceFix,
    NcclIssue,
    NcclKnob,
    TorchNccl,
)
from gpufix.errors import GpufixError

DEFAULT_DIR = Path(__file__).resolve().parent / "knowledge"

_KINDS = ("production", "lts", "new-feature")
# Branch kinds NVIDIA supports for production use; new-feature branches are short-lived.
SUPPORTED_KINDS = ("production", "lts")
_MODULES = ("proprietary", "either", "open")
_FIXES = ("upgrade", "downgrade")
_ORIGINS = ("ubuntu", "nvidia")


@dataclass(frozen=True)
class UbuntuRelease:
    codename: str
    version_id: str
    ga_kernel: str
    hwe_kernel: str | None
    hwe_metapackage: str | None
    glibc: str
    system_python: str
    pythons_available: tuple[str, ...]
    source: str
    distro: str = "ubuntu"
    note: str | None = None
    # YYYY-MM: the last month of standard support (Canonical's release cycle); after it,
    # updates reach only hosts with Ubuntu Pro (ESM)
    standard_support_end: str | None = None

    def past_standard_support(self, day: date) -> bool:
        if not self.standard_support_end:
            return False
        year, month = (int(x) for x in self.standard_support_end.split("-"))
        return (day.year, day.month) > (year, month)


@dataclass(frozen=True)
class KernelCheck:
    threshold: str
    since_accelerate: str
    source: str
    note: str | None = None


@dataclass(frozen=True)
class CudaToolkit:
    version: str
    min_driver: str
    source: str
    note: str | None = None


@dataclass(frozen=True)
class MinorCompat:
    major: int
    floor: str
    below: str | None
    source: str
    note: str | None = None


@dataclass(frozen=True)
class CudaPackaged:
    codename: str
    repo: str
    versions: tuple[str, ...]
    source: str
    note: str | None = None


@dataclass(frozen=True)
class TorchRelease:
    version: str
    cuda: tuple[str, ...]
    python_min: str
    python_max: str
    glibc_min: str
    source: str
    cuda_glibc: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    note: str | None = None

    def glibc_for(self, cuda: str | None) -> str:
        """glibc floor of one CUDA variant (some variants moved to manylinux_2_28 early)."""
        return self.cuda_glibc.get(cuda or "", self.glibc_min)


@dataclass(frozen=True)
class LibRelease:
    version: str
    python_min: str
    python_max: str | None
    torch_min: str | None
    source: str
    note: str | None = None


@dataclass(frozen=True)
class TorchBuild:
    """The GPU architectures one torch CUDA build has kernels for."""

    torch: str  # PEP 440 specifier on the torch release
    cuda: str
    archs: tuple[str, ...]
    ptx: tuple[str, ...]
    source: str
    note: str | None = None

    def runs_on(self, cc: object) -> bool | None:
        """Whether the build has a kernel for compute capability cc (None: cc unreadable).

        A cubin for X.y runs on X.z with z >= y; PTX for X.y is JIT-compiled for any newer GPU.
        """
        have = versions.major_minor(cc)
        if have is None:
            return None
        for a in self.archs:
            mm = versions.major_minor(a)
            if mm is not None and mm[0] == have[0] and mm[1] <= have[1]:
                return True
        return any((versions.major_minor(a) or (99, 0)) <= have for a in self.ptx)


@dataclass(frozen=True)
class GpuArch:
    name: str
    compute_capabilities: tuple[str, ...]
    first_cuda: str
    last_cuda: str | None
    last_driver_branch: int | None
    kernel_modules: str  # proprietary | either | open
    source: str
    note: str | None = None


@dataclass(frozen=True)
class GpuP2p:
    match: str  # substring of the GPU name nvidia-smi reports
    p2p: bool
    checked: str
    source: str
    note: str | None = None
    # an OK P2P reading (topo -p2p r) from a driver older than this is not believed: P2P does not
    # work on this model below it (accelerate's check_cuda_p2p_ib_support)
    ok_reading_before_driver: str | None = None


@dataclass(frozen=True)
class GpuModel:
    match: str  # the model as NVIDIA writes it ("A100", "RTX 4090")
    compute_capability: str
    source: str
    note: str | None = None
    multi_node_nvlink: bool = False  # its systems join several hosts' GPUs in one NVLink domain
    # its HGX/DGX boards use fourth-generation NVSwitches: fabric manager needs NVLSM beside it
    fourth_gen_nvswitch: bool = False
    # its SXM parts sit on an 8-GPU HGX baseboard whose GPUs meet through NVSwitch
    nvswitch_board: bool = False
    # nvidia-smi names its SXM part with a mark (A100-SXM4-80GB, H100 80GB HBM3): a name without
    # one is not known to be the SXM part
    sxm_marked: bool = False


@dataclass(frozen=True)
class DriverBranch:
    branch: int
    kind: str
    eol: str | None  # "YYYY-MM": supported through the end of that month
    open_modules: bool
    checked: str
    source: str
    note: str | None = None

    def end_of_support(self) -> date | None:
        if self.eol is None:
            return None
        year, month = (int(x) for x in self.eol.split("-"))
        return date(year, month, calendar.monthrange(year, month)[1])

    def supported_on(self, day: date) -> bool:
        """An lts/production branch NVIDIA still supports on that day (a date, not the clock)."""
        end = self.end_of_support()
        return self.kind in SUPPORTED_KINDS and end is not None and day <= end

    def days_left(self, day: date) -> int | None:
        """Days from `day` to the branch's last supported day (negative once it has passed);
        None when the row has no end date."""
        end = self.end_of_support()
        return None if end is None else (end - day).days


@dataclass(frozen=True)
class DriverIssue:
    """A driver problem from NVIDIA's release notes: the versions it affects (one branch), the
    first version with the fix, the platform it holds on and the evidence it produces."""

    id: str
    affected: str  # PEP 440 specifier on the driver version, inside one branch
    fixed_in: str  # the first version of that branch with the fix
    symptom: str
    shows: tuple[str, ...]  # evidence keys (evidence_fixes.yaml vocabulary) this problem produces
    source: str
    nvswitch: bool | None = None  # True: only NVSwitch systems; False: only without; None: any
    archs: tuple[str, ...] = ()  # only these GPU architectures (gpu_archs.yaml names); (): all
    fix: str = "upgrade"
    good_branches: tuple[int, ...] = ()  # other branches the notes name as fixed
    note: str | None = None

    def matches(self, driver_version: object) -> bool | None:
        """Whether a driver ('535.183.01', '1:545.23.08-0ubuntu1') is affected; None: unparsable."""
        v = versions.driver(driver_version)
        if v is None:
            return None
        return SpecifierSet(self.affected).contains(v, prereleases=True)

    def holds_on(self, nvswitch: bool, archs: tuple[str, ...]) -> bool:
        """Whether the platform condition holds on a host with these facts (an architecture
        nobody read is not a match: unknown is not evidence)."""
        if self.nvswitch is not None and nvswitch != self.nvswitch:
            return False
        return not self.archs or bool(set(self.archs) & set(archs))


@dataclass(frozen=True)
class DriverPackages:
    codename: str
    origin: str
    branches: tuple[int, ...]
    server_branches: tuple[int, ...]
    source: str
    index_verified: bool = True
    note: str | None = None


@dataclass(frozen=True)
class ContainerImage:
    ref: str
    digest: str | None
    cuda: str
    torch: str
    min_driver: str
    source: str
    note: str | None = None


@dataclass(frozen=True)
class NcclProfile:
    name: str
    settings: Mapping[str, str]
    when: str
    cost: str
    source: str
    debug: bool = False
    note: str | None = None


_TABLES: Mapping[str, c.Table] = MappingProxyType(
    {
        "ubuntu": c.table(
            UbuntuRelease,
            "codename",
            ("distro", "standard_support_end"),
            codename=c.text,
            distro=c.choice(("ubuntu", "debian")),
            standard_support_end=c.optional(
                c.pattern(re.compile(r"\d{4}-(0[1-9]|1[0-2])"), "year-month")
            ),
            version_id=c.version,
            ga_kernel=c.version,
            hwe_kernel=c.optional(c.version),
            hwe_metapackage=c.optional(c.text),
            glibc=c.version,
            system_python=c.version,
            pythons_available=c.listof(c.version),
        ),
        "accelerate_kernel_check": c.table(
            KernelCheck, "", (), threshold=c.version, since_accelerate=c.version
        ),
        "cuda_toolkits": c.table(
            CudaToolkit, "version", (), version=c.version, min_driver=c.version
        ),
        "cuda_minor_compat": c.table(
            MinorCompat, "major", (), major=c.integer, floor=c.version, below=c.optional(c.version)
        ),
        "cuda_packaged": c.table(
            CudaPackaged, "codename", (), codename=c.text, repo=c.text, versions=c.listof(c.version)
        ),
        "torch_releases": c.table(
            TorchRelease,
            "version",
            ("cuda_glibc",),
            version=c.version,
            cuda=c.listof(c.version),
            python_min=c.version,
            python_max=c.version,
            glibc_min=c.version,
            cuda_glibc=c.mapping(c.version, c.version),
        ),
        "transformers_releases": c.table(
            LibRelease,
            "version",
            (),
            version=c.version,
            python_min=c.version,
            python_max=c.optional(c.version),
            torch_min=c.optional(c.version),
        ),
        "accelerate_releases": c.table(
            LibRelease,
            "version",
            (),
            version=c.version,
            python_min=c.version,
            python_max=c.optional(c.version),
            torch_min=c.optional(c.version),
        ),
        "gpu_archs": c.table(
            GpuArch,
            "",
            (),
            name=c.text,
            compute_capabilities=c.listof(c.version),
            first_cuda=c.version,
            last_cuda=c.optional(c.version),
            last_driver_branch=c.optional(c.integer),
            kernel_modules=c.choice(_MODULES),
        ),
        "gpu_p2p": c.table(
            GpuP2p,
            "match",
            ("ok_reading_before_driver",),
            match=c.text,
            p2p=c.boolean,
            checked=c.day,
            ok_reading_before_driver=c.optional(c.version),
        ),
        "gpu_models": c.table(
            GpuModel,
            "match",
            ("multi_node_nvlink", "fourth_gen_nvswitch", "nvswitch_board", "sxm_marked"),
            match=c.text,
            compute_capability=c.version,
            multi_node_nvlink=c.boolean,
            fourth_gen_nvswitch=c.boolean,
            nvswitch_board=c.boolean,
            sxm_marked=c.boolean,
        ),
        "torch_builds": c.table(
            TorchBuild,
            "",
            (),
            torch=c.spec,
            cuda=c.version,
            archs=c.listof(c.version),
            ptx=c.listof(c.version),
        ),
        "driver_branches": c.table(
            DriverBranch,
            "branch",
            (),
            branch=c.integer,
            kind=c.choice(_KINDS),
            eol=c.optional(c.pattern(re.compile(r"\d{4}-(0[1-9]|1[0-2])"), "year-month")),
            open_modules=c.boolean,
            checked=c.day,
        ),
        "driver_issues": c.table(
            DriverIssue,
            "id",
            ("nvswitch", "archs", "fix", "good_branches"),
            empty_ok=True,
            id=c.text,
            affected=c.spec,
            fixed_in=c.version,
            symptom=c.text,
            shows=kb_evidence.evidence_list,
            nvswitch=c.optional(c.boolean),
            archs=c.listof(c.text),
            fix=c.choice(_FIXES),
            good_branches=c.listof(c.integer),
        ),
        "ubuntu_driver_packages": c.table(
            DriverPackages,
            "",
            ("index_verified",),
            codename=c.text,
            origin=c.choice(_ORIGINS),
            branches=c.listof(c.integer),
            server_branches=c.listof(c.integer),
            index_verified=c.boolean,
        ),
        "container_images": c.table(
            ContainerImage,
            "ref",
            (),
            ref=c.text,
            digest=c.optional(c.pattern(re.compile(r"sha256:[0-9a-f]{64}"), "sha256 digest")),
            cuda=c.version,
            torch=c.wheel_version,
            min_driver=c.version,
        ),
        "nccl_profiles": c.table(
            NcclProfile,
            "name",
            ("debug",),
            name=c.text,
            settings=c.mapping(c.text, c.setting_value),
            when=c.text,
            cost=c.text,
            debug=c.boolean,
        ),
        **kb_evidence.TABLES,
    }
)


def _label(rel: str, index: int, row: object, key: str) -> str:
    name = row.get(key) if key and isinstance(row, dict) else None
    return f"{rel} row {index}" + (f" ({name})" if name is not None else "")


def _build_row(table: c.Table, rel: str, index: int, row: object) -> Any:
    label = _label(rel, index, row, table.key)
    if not isinstance(row, dict):
        raise GpufixError(f"knowledge base: {label}: a row must be a mapping, got {row!r}")
    unknown = sorted(set(row) - set(table.fields), key=str)
    if unknown:
        raise GpufixError(f"knowledge base: {label}: unknown key {unknown[0]!r}")
    if "source" not in row or row["source"] is None:
        raise GpufixError(f"knowledge base: {label}: has no source (a URL or document name)")
    values: dict[str, Any] = {}
    for name, check in table.fields.items():
        if name not in row:
            if name in table.optional:
                continue
            raise GpufixError(f"knowledge base: {label}: missing key {name!r}")
        try:
            values[name] = check(row[name])
        except c.RowError as e:
            raise GpufixError(f"knowledge base: {label}: {name} {e}") from None
    return table.cls(**values)


def _read_table(directory: Path, name: str, table: c.Table) -> tuple[list[Any], tuple[Any, ...]]:
    path = directory / f"{name}.yaml"
    rel = f"knowledge/{path.name}"
    if not path.is_file():
        raise GpufixError(f"knowledge base: {rel} is missing from {directory}")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise GpufixError(f"knowledge base: cannot read {rel}: {e}") from None
    except yaml.YAMLError as e:
        where = getattr(e, "problem_mark", None)
        at = f" at line {where.line + 1}" if where is not None else ""
        raise GpufixError(f"knowledge base: {rel} is not valid YAML{at}") from None
    if raw is None and table.empty_ok:
        raw = []
    if not isinstance(raw, list) or (not raw and not table.empty_ok):
        raise GpufixError(f"knowledge base: {rel} must be a non-empty list of rows")
    rows = tuple(_build_row(table, rel, i, row) for i, row in enumerate(raw, start=1))
    if table.key:
        seen: set[object] = set()
        for i, row in enumerate(rows, start=1):
            k = getattr(row, table.key)
            if k in seen:
                raise GpufixError(f"knowledge base: {rel} row {i}: duplicate {table.key} {k!r}")
            seen.add(k)
    return raw, rows


# --- the knowledge base ---------------------------------------------------------------------


def _mm(text: object) -> str | None:
    """'12.1.105' / '12.1' / 12.1 -> '12.1'; None when there is no version in it."""
    r = versions.major_minor(text)
    return f"{r[0]}.{r[1]}" if r else None


@dataclass(frozen=True)
class KnowledgeBase:
    """All tables, read-only. Accessors return None (or an empty tuple) for what is not known."""

    ubuntu_releases: tuple[UbuntuRelease, ...]
    accelerate_kernel_check: KernelCheck
    cuda_toolkits: tuple[CudaToolkit, ...]
    cuda_minor_compat: tuple[MinorCompat, ...]
    cuda_packaged_rows: tuple[CudaPackaged, ...]
    torch_releases: tuple[TorchRelease, ...]
    transformers_releases: tuple[LibRelease, ...]
    accelerate_releases: tuple[LibRelease, ...]
    gpu_archs: tuple[GpuArch, ...]
    gpu_p2p: tuple[GpuP2p, ...]
    gpu_models: tuple[GpuModel, ...]
    torch_builds: tuple[TorchBuild, ...]
    driver_branches: tuple[DriverBranch, ...]
    driver_issues: tuple[DriverIssue, ...]
    driver_package_rows: tuple[DriverPackages, ...]
    container_images: tuple[ContainerImage, ...]
    nccl_profiles: tuple[NcclProfile, ...]
    error_signatures: tuple[ErrorSignature, ...]
    evidence_fixes: tuple[EvidenceFix, ...]
    nccl_issues: tuple[NcclIssue, ...]
    nccl_knobs: tuple[NcclKnob, ...]
    torch_nccl: tuple[TorchNccl, ...]
    digest: str
    path: str

    def ubuntu(self, codename: str) -> UbuntuRelease | None:
        c = str(codename).strip().lower()
        return next((u for u in self.ubuntu_releases if u.codename == c), None)

    def ubuntu_by_version(self, version_id: str) -> UbuntuRelease | None:
        v = str(version_id).strip()
        return next((u for u in self.ubuntu_releases if u.version_id == v), None)

    def cuda_min_driver(self, version: object) -> str | None:
        """The toolkit's own minimum driver (GA row of Table 3), for '12.1', '12.1.105', 'V12.1'."""
        mm = _mm(version)
        return next((t.min_driver for t in self.cuda_toolkits if t.version == mm), None)

    def cuda_minor_compat_floor(self, major: object) -> str | None:
        """Minor-version-compatibility floor for a CUDA major (11, '12', '12.4' all work)."""
        r = versions.release(major, 1)
        m = r[0] if r else None
        return next((c.floor for c in self.cuda_minor_compat if c.major == m), None)

    def cuda_packaged(self, codename: str) -> tuple[str, ...]:
        c = str(codename).strip().lower()
        row = next((p for p in self.cuda_packaged_rows if p.codename == c), None)
        return row.versions if row else ()

    def arch_for_cc(self, cc: object) -> GpuArch | None:
        mm = _mm(cc)
        return next((a for a in self.gpu_archs if mm in a.compute_capabilities), None)

    def first_cuda_for_cc(self, cc: object) -> str | None:
        arch = self.arch_for_cc(cc)
        return arch.first_cuda if arch else None

    def ubuntu_driver_packages(self, codename: str) -> tuple[DriverPackages, ...]:
        """Rows for that release, one per origin ('ubuntu' archive, 'nvidia' CUDA repo)."""
        c = str(codename).strip().lower()
        return tuple(p for p in self.driver_package_rows if p.codename == c)

    def driver_branch(self, branch: object) -> DriverBranch | None:
        b = versions.driver_branch(branch)
        return next((d for d in self.driver_branches if d.branch == b), None)

    def torch_release(self, version: object) -> TorchRelease | None:
        """The row for a torch version ('2.1.2+cu121' matches '2.1.2')."""
        v = versions.parse(str(version).split("+", 1)[0]) if version is not None else None
        return next((t for t in self.torch_releases if versions.parse(t.version) == v), None)

    def nccl_profile(self, name: str) -> NcclProfile | None:
        return next((p for p in self.nccl_profiles if p.name == name), None)

    def torch_nccl_version(self, torch: object, cuda: object = None) -> TorchNccl | None:
        """The NCCL a torch wheel pins ('2.1.2+cu121' reads as 2.1.2): the CUDA build `cuda`'s
        ('12.6' or (12, 6)) where it differs from PyPI's default wheel, else the default's; for
        a release not recorded, the newest recorded one of the same minor."""
        v = versions.parse(str(torch).split("+", 1)[0]) if torch is not None else None
        if v is None:
            return None
        same = [r for r in self.torch_nccl if versions.parse(r.torch) == v]
        minor = [
            r
            for r in self.torch_nccl
            if versions.major_minor(r.torch) == (v.major, v.minor) and versions.key(r.torch) <= v
        ]
        rows = same or minor
        if not rows:
            return None
        newest = max(versions.key(r.torch) for r in rows)
        rows = [r for r in rows if versions.key(r.torch) == newest]
        mm = f"{cuda[0]}.{cuda[1]}" if isinstance(cuda, tuple) else _mm(cuda)
        build = next((r for r in rows if r.variant and r.cuda == mm), None)
        return build or next((r for r in rows if not r.variant), None)

    def nccl_debug_knobs(self) -> tuple[str, ...]:
        """The NCCL settings that belong in a diagnosis run only: the debug profile's keys."""
        return tuple(k for p in self.nccl_profiles if p.debug for k in p.settings)

    def torch_build(self, torch: object, cuda: object) -> TorchBuild | None:
        """The architecture list of torch `torch` built for CUDA `cuda` ('2.8.0', '12.8')."""
        v = versions.parse(str(torch).split("+", 1)[0]) if torch is not None else None
        mm = _mm(cuda)
        if v is None or mm is None:
            return None
        return next(
            (
                b
                for b in self.torch_builds
                if b.cuda == mm and SpecifierSet(b.torch).contains(v, prereleases=True)
            ),
            None,
        )

    def nccl_defaults(self) -> dict[str, str]:
        """The knobs whose "off" has a documented default to go back to (nccl_knobs.yaml)."""
        return {k.name: k.default for k in self.nccl_knobs if k.default is not None}

    def gpu_p2p_capable(self, name: object) -> bool | None:
        """False for GPU models that cannot do PCIe P2P at all; None when nothing is recorded."""
        row = self._gpu_p2p_row(name)
        return row.p2p if row else None

    def p2p_ok_reading_trusted_from(self, name: object) -> str | None:
        """The driver from which an OK P2P reading is believed for this model; None: always."""
        row = self._gpu_p2p_row(name)
        return row.ok_reading_before_driver if row else None

    def _gpu_p2p_row(self, name: object) -> GpuP2p | None:
        return next((r for r in self.gpu_p2p if _names_model(gpu_name(name), r.match)), None)

    def compute_capability_of(self, name: object) -> str | None:
        """The compute capability NVIDIA lists for this GPU name (gpu_models.yaml), the longest
        model that matches; None when no row does."""
        row = self._gpu_model(name)
        return row.compute_capability if row else None

    def forms_multi_node_nvlink(self, name: object) -> bool:
        """True for a GPU name whose model joins several hosts' GPUs in one NVLink domain
        (gpu_models.yaml, multi_node_nvlink); False when no row says so."""
        row = self._gpu_model(name)
        return bool(row and row.multi_node_nvlink)

    def uses_fourth_gen_nvswitch(self, name: object) -> bool:
        """True for a GPU name whose HGX/DGX boards use fourth-generation NVSwitches, where fabric
        manager needs the NVLink Subnet Manager beside it (gpu_models.yaml, fourth_gen_nvswitch);
        False when no row says so."""
        row = self._gpu_model(name)
        return bool(row and row.fourth_gen_nvswitch)

    def on_nvswitch_board(self, name: object) -> bool:
        """True for a GPU name that is an SXM part of a model NVIDIA ships on NVSwitch 8-GPU
        baseboards (gpu_models.yaml, nvswitch_board): not a PCIe card, not an NVL card joined by
        NVLink bridges, and for a model whose SXM part nvidia-smi names with a mark (sxm_marked:
        A100-SXM4, H100 80GB HBM3), a name that carries it."""
        row = self._gpu_model(name)
        text = gpu_name(name).upper()
        if not (row and row.nvswitch_board) or "PCIE" in text or " NVL " in f" {text} ":
            return False
        return not row.sxm_marked or "SXM" in text or "HBM3" in text

    def _gpu_model(self, name: object) -> GpuModel | None:
        """The gpu_models.yaml row for this GPU name: the longest model that matches."""
        found = [r for r in self.gpu_models if _names_model(gpu_name(name), r.match)]
        return max(found, key=lambda r: len(r.match)) if found else None

    def first_driver_branch(self, arch: GpuArch) -> int | None:
        """The branch of the first toolkit's minimum driver (Blackwell: CUDA 12.8 -> R570)."""
        return versions.driver_branch(self.cuda_min_driver(arch.first_cuda))

    def checked(self) -> date:
        """The newest day any dated row was checked: the plan date when the caller gives none."""
        days = [r.checked for r in self.driver_branches] + [r.checked for r in self.gpu_p2p]
        return date.fromisoformat(max(days))


def load(path: str | Path | None = None) -> KnowledgeBase:
    """Load and validate the knowledge base in `path` (default: the packaged knowledge/ folder).

    Cached per resolved path; the result is immutable. Raises GpufixError with one line on any
    problem in the data.
    """
    return _load(str(Path(path or DEFAULT_DIR).resolve()))


@lru_cache(maxsize=8)
def _load(directory: str) -> KnowledgeBase:
    d = Path(directory)
    if not d.is_dir():
        raise GpufixError(f"knowledge base: {directory} is not a directory")
    extra = sorted(p.name for p in d.glob("*.yaml") if p.stem not in _TABLES)
    if extra:
        raise GpufixError(f"knowledge base: knowledge/{extra[0]} is not a known table")
    raw: dict[str, Any] = {}
    rows: dict[str, tuple[Any, ...]] = {}
    for name, table in _TABLES.items():
        raw[name], rows[name] = _read_table(d, name, table)
    if len(rows["accelerate_kernel_check"]) != 1:
        raise GpufixError(
            "knowledge base: knowledge/accelerate_kernel_check.yaml must hold exactly one row"
        )
    _cross_check(rows)
    problem = kb_evidence.cross_check(rows)
    if problem:
        raise GpufixError(f"knowledge base: {problem}")
    blob = json.dumps(raw, sort_keys=True, separators=(",", ":"), default=str)
    return KnowledgeBase(
        ubuntu_releases=rows["ubuntu"],
        accelerate_kernel_check=rows["accelerate_kernel_check"][0],
        cuda_toolkits=rows["cuda_toolkits"],
        cuda_minor_compat=rows["cuda_minor_compat"],
        cuda_packaged_rows=rows["cuda_packaged"],
        torch_releases=rows["torch_releases"],
        transformers_releases=rows["transformers_releases"],
        accelerate_releases=rows["accelerate_releases"],
        gpu_archs=rows["gpu_archs"],
        gpu_p2p=rows["gpu_p2p"],
        gpu_models=rows["gpu_models"],
        torch_builds=rows["torch_builds"],
        driver_branches=rows["driver_branches"],
        driver_issues=rows["driver_issues"],
        driver_package_rows=rows["ubuntu_driver_packages"],
        container_images=rows["container_images"],
        nccl_profiles=rows["nccl_profiles"],
        error_signatures=rows["error_signatures"],
        evidence_fixes=rows["evidence_fixes"],
        nccl_issues=rows["nccl_issues"],
        nccl_knobs=rows["nccl_knobs"],
        torch_nccl=rows["torch_nccl"],
        digest=hashlib.sha256(blob.encode("utf-8")).hexdigest(),
        path=directory,
    )


def gpu_name(name: object) -> str:
    """A GPU name spelled as NVIDIA's tables write models: "RTX4090" -> "RTX 4090", "1080Ti" ->
    "1080 Ti", a bare "A6000" -> "RTX A6000" (reports and inventories drop the spaces)."""
    s = " ".join(str(name).split())
    s = re.sub(r"\b(RTX|GTX)(?=\d)", r"\1 ", s, flags=re.IGNORECASE)
    s = re.sub(r"(?<=\d)(Ti|SUPER)\b", r" \1", s, flags=re.IGNORECASE)
    return re.sub(r"(?<!RTX )\b(A[4-6][05]00)\b", r"RTX \1", s, flags=re.IGNORECASE)


def _names_model(name: str, model: str) -> bool:
    """`model` stands in `name` on its own: no letter or digit before it, no digit after it."""
    return (
        re.search(rf"(?<![A-Za-z0-9]){re.escape(model)}(?![0-9])", name, re.IGNORECASE) is not None
    )


def _cross_check(rows: Mapping[str, tuple[Any, ...]]) -> None:
    """References between tables must resolve, or a decision would silently miss a fact."""
    known = {cc for a in rows["gpu_archs"] for cc in a.compute_capabilities}
    for i, model in enumerate(rows["gpu_models"], start=1):
        if model.compute_capability not in known:
            raise GpufixError(
                f"knowledge base: knowledge/gpu_models.yaml row {i} ({model.match}): compute "
                f"capability {model.compute_capability} is in no gpu_archs.yaml row"
            )
    codenames = {u.codename for u in rows["ubuntu"]}
    branches = {b.branch for b in rows["driver_branches"]}
    for name in ("cuda_packaged", "ubuntu_driver_packages"):
        for i, row in enumerate(rows[name], start=1):
            if row.codename not in codenames:
                raise GpufixError(
                    f"knowledge base: knowledge/{name}.yaml row {i}: "
                    f"unknown codename {row.codename!r}"
                )
    for i, arch in enumerate(rows["gpu_archs"], start=1):
        if arch.last_driver_branch is not None and arch.last_driver_branch not in branches:
            raise GpufixError(
                f"knowledge base: knowledge/gpu_archs.yaml row {i} ({arch.name}): "
                f"last driver branch {arch.last_driver_branch} is not in driver_branches.yaml"
            )
    archs = {a.name for a in rows["gpu_archs"]}
    for i, issue in enumerate(rows["driver_issues"], start=1):
        problem = _driver_issue_problem(issue, branches, archs)
        if problem:
            raise GpufixError(
                f"knowledge base: knowledge/driver_issues.yaml row {i} ({issue.id}): {problem}"
            )
    seen: dict[str, str] = {}
    for i, arch in enumerate(rows["gpu_archs"], start=1):
        for cc in arch.compute_capabilities:
            if cc in seen:
                raise GpufixError(
                    f"knowledge base: knowledge/gpu_archs.yaml row {i} ({arch.name}): "
                    f"compute capability {cc} already listed under {seen[cc]}"
                )
            seen[cc] = arch.name


def _driver_issue_problem(issue: DriverIssue, branches: set[int], archs: set[str]) -> str | None:
    """A driver_issues row must name one branch's range and a fix outside it."""
    missing = [b for b in issue.good_branches if b not in branches]
    if missing:
        return f"good branch {missing[0]} is not in driver_branches.yaml"
    bad = [a for a in issue.archs if a not in archs]
    if bad:
        return f"unknown architecture {bad[0]!r} (not in gpu_archs.yaml)"
    if issue.matches(issue.fixed_in):
        return f"fixed_in {issue.fixed_in} lies inside affected {issue.affected!r}"
    branch = versions.driver_branch(issue.fixed_in)
    if branch is None:
        return f"fixed_in {issue.fixed_in!r} is not a driver version"
    spec = SpecifierSet(issue.affected)
    named = {versions.driver_branch(s.version.rstrip(".*")) for s in spec}
    if (
        named != {branch}
        or spec.contains(f"{branch - 1}.999.99")
        or spec.contains(f"{branch + 1}.0")
    ):
        return f"affected {issue.affected!r} is not a range inside R{branch} (fixed_in's branch)"
    return None
