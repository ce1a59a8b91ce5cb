"""The knowledge base: sourced facts in knowledge/*.yaml, validated and queried in one place.

Every row names its `source`; a row without one, with a malformed version or with an unknown key
stops the load with one line naming the file and the row.
"""

from __future__ import annotations

import calendar
import hashlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import date
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml
from packaging.specifiers import InvalidSpecifier, SpecifierSet

from gpufix import versions
from gpufix.errors import GpufixError

DEFAULT_DIR = Path(__file__).resolve().parent / "knowledge"

# Versions in the data are plain dotted numbers ("5.4", "530.30.02"); wheel versions may carry a
# local part ("2.1.0a0+32f93b1"), so those fields use the looser WHEEL pattern.
_DOTTED = re.compile(r"\d+(?:\.\d+)*")
_WHEEL = re.compile(r"\d+(?:\.\d+)*(?:(?:a|b|rc)\d+)?(?:\+[0-9A-Za-z.]+)?")
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


@dataclass(frozen=True)
class DriverIssue:
    id: str
    affected: str
    symptom: str
    fix: str
    good_branches: tuple[int, ...]
    source: str
    note: str | None = None

    def matches(self, driver_version: object) -> bool | None:
        """Whether a driver ('535.183.01', '1:545.23.08-0ubuntu1') is affected; None: unparsable."""
        v = versions.driver(driver_version)
        if v is None:
            return None
        return SpecifierSet(self.affected).contains(v, prereleases=True)


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


# --- row validation -------------------------------------------------------------------------


class _RowError(Exception):
    """A problem with one field; the loader adds the file and row."""


def _str(v: object) -> str:
    if not isinstance(v, str) or not v.strip():
        raise _RowError("must be a non-empty string")
    return v.strip()


def _pattern(pat: re.Pattern[str], what: str) -> Callable[[object], str]:
    def check(v: object) -> str:
        # YAML reads 12.10 as the float 12.1: insist on quoted strings so that cannot happen.
        if not isinstance(v, str):
            raise _RowError(f"must be a quoted {what} string, got {v!r}")
        if not pat.fullmatch(v):
            raise _RowError(f"malformed {what} {v!r}")
        return v

    return check


_version = _pattern(_DOTTED, "version")
_day = _pattern(re.compile(r"\d{4}-\d{2}-\d{2}"), "date (YYYY-MM-DD)")
_wheel_version = _pattern(_WHEEL, "version")


def _int(v: object) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise _RowError(f"must be an integer, got {v!r}")
    return v


def _bool(v: object) -> bool:
    if not isinstance(v, bool):
        raise _RowError(f"must be true or false, got {v!r}")
    return v


def _list(item: Callable[[object], Any]) -> Callable[[object], tuple[Any, ...]]:
    def check(v: object) -> tuple[Any, ...]:
        if not isinstance(v, list):
            raise _RowError(f"must be a list, got {v!r}")
        return tuple(item(x) for x in v)

    return check


def _optional(check: Callable[[object], Any]) -> Callable[[object], Any]:
    return lambda v: None if v is None else check(v)


def _choice(options: tuple[str, ...]) -> Callable[[object], str]:
    def check(v: object) -> str:
        if v not in options:
            raise _RowError(f"must be one of {', '.join(options)}, got {v!r}")
        return str(v)

    return check


def _spec(v: object) -> str:
    s = _str(v)
    try:
        SpecifierSet(s)
    except InvalidSpecifier:
        raise _RowError(f"malformed version specifier {s!r}") from None
    return s


def _mapping(
    key: Callable[[object], str], value: Callable[[object], str]
) -> Callable[[object], Mapping[str, str]]:
    def check(v: object) -> Mapping[str, str]:
        if not isinstance(v, dict):
            raise _RowError(f"must be a mapping, got {v!r}")
        return MappingProxyType({key(k): value(x) for k, x in v.items()})

    return check


def _setting_value(v: object) -> str:
    # nccl.conf values are text; quote numbers in the YAML so "1" stays "1".
    if not isinstance(v, str):
        raise _RowError(f"setting values must be quoted strings, got {v!r}")
    return v


def _source(v: object) -> str:
    try:
        return _str(v)
    except _RowError:
        raise _RowError("has no source (a URL or document name)") from None


@dataclass(frozen=True)
class _Table:
    cls: type
    fields: Mapping[str, Callable[[object], Any]]
    optional: frozenset[str]
    key: str  # the field that names a row in messages and must be unique ("" = none)


_NOTE = {"note": _optional(_str)}


def _table(
    cls: type, key: str, optional: tuple[str, ...], **fields: Callable[[object], Any]
) -> _Table:
    all_fields = {**fields, **_NOTE, "source": _source}
    return _Table(cls, MappingProxyType(all_fields), frozenset((*optional, "note")), key)


_TABLES: Mapping[str, _Table] = MappingProxyType(
    {
        "ubuntu": _table(
            UbuntuRelease,
            "codename",
            ("distro",),
            codename=_str,
            distro=_choice(("ubuntu", "debian")),
            version_id=_version,
            ga_kernel=_version,
            hwe_kernel=_optional(_version),
            hwe_metapackage=_optional(_str),
            glibc=_version,
            system_python=_version,
            pythons_available=_list(_version),
        ),
        "accelerate_kernel_check": _table(
            KernelCheck, "", (), threshold=_version, since_accelerate=_version
        ),
        "cuda_toolkits": _table(CudaToolkit, "version", (), version=_version, min_driver=_version),
        "cuda_minor_compat": _table(
            MinorCompat, "major", (), major=_int, floor=_version, below=_optional(_version)
        ),
        "cuda_packaged": _table(
            CudaPackaged, "codename", (), codename=_str, repo=_str, versions=_list(_version)
        ),
        "torch_releases": _table(
            TorchRelease,
            "version",
            ("cuda_glibc",),
            version=_version,
            cuda=_list(_version),
            python_min=_version,
            python_max=_version,
            glibc_min=_version,
            cuda_glibc=_mapping(_version, _version),
        ),
        "transformers_releases": _table(
            LibRelease,
            "version",
            (),
            version=_version,
            python_min=_version,
            python_max=_optional(_version),
            torch_min=_optional(_version),
        ),
        "accelerate_releases": _table(
            LibRelease,
            "version",
            (),
            version=_version,
            python_min=_version,
            python_max=_optional(_version),
            torch_min=_optional(_version),
        ),
        "gpu_archs": _table(
            GpuArch,
            "",
            (),
            name=_str,
            compute_capabilities=_list(_version),
            first_cuda=_version,
            last_cuda=_optional(_version),
            last_driver_branch=_optional(_int),
            kernel_modules=_choice(_MODULES),
        ),
        "gpu_p2p": _table(GpuP2p, "match", (), match=_str, p2p=_bool, checked=_day),
        "torch_builds": _table(
            TorchBuild,
            "",
            (),
            torch=_spec,
            cuda=_version,
            archs=_list(_version),
            ptx=_list(_version),
        ),
        "driver_branches": _table(
            DriverBranch,
            "branch",
            (),
            branch=_int,
            kind=_choice(_KINDS),
            eol=_optional(_pattern(re.compile(r"\d{4}-(0[1-9]|1[0-2])"), "year-month")),
            open_modules=_bool,
            checked=_day,
        ),
        "driver_issues": _table(
            DriverIssue,
            "id",
            (),
            id=_str,
            affected=_spec,
            symptom=_str,
            fix=_choice(_FIXES),
            good_branches=_list(_int),
        ),
        "ubuntu_driver_packages": _table(
            DriverPackages,
            "",
            ("index_verified",),
            codename=_str,
            origin=_choice(_ORIGINS),
            branches=_list(_int),
            server_branches=_list(_int),
            index_verified=_bool,
        ),
        "container_images": _table(
            ContainerImage,
            "ref",
            (),
            ref=_str,
            digest=_optional(_pattern(re.compile(r"sha256:[0-9a-f]{64}"), "sha256 digest")),
            cuda=_version,
            torch=_wheel_version,
            min_driver=_version,
        ),
        "nccl_profiles": _table(
            NcclProfile,
            "name",
            ("debug",),
            name=_str,
            settings=_mapping(_str, _setting_value),
            when=_str,
            cost=_str,
            debug=_bool,
        ),
    }
)


def _label(rel: str, index: int, row: object, key: str) -> str:
    name = row.get(key) if key and isinstance(row, dict) else None
    return f"{rel} row {index}" + (f" ({name})" if name is not None else "")


def _build_row(table: _Table, rel: str, index: int, row: object) -> Any:
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
        except _RowError as e:
            raise GpufixError(f"knowledge base: {label}: {name} {e}") from None
    return table.cls(**values)


def _read_table(directory: Path, name: str, table: _Table) -> tuple[list[Any], tuple[Any, ...]]:
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
    if not isinstance(raw, list) or not raw:
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
    torch_builds: tuple[TorchBuild, ...]
    driver_branches: tuple[DriverBranch, ...]
    driver_issues: tuple[DriverIssue, ...]
    driver_package_rows: tuple[DriverPackages, ...]
    container_images: tuple[ContainerImage, ...]
    nccl_profiles: tuple[NcclProfile, ...]
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

    def gpu_p2p_capable(self, name: object) -> bool | None:
        """False for GPU models that cannot do PCIe P2P at all; None when nothing is recorded."""
        row = next((r for r in self.gpu_p2p if r.match in str(name)), None)
        return row.p2p if row else None

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
        torch_builds=rows["torch_builds"],
        driver_branches=rows["driver_branches"],
        driver_issues=rows["driver_issues"],
        driver_package_rows=rows["ubuntu_driver_packages"],
        container_images=rows["container_images"],
        nccl_profiles=rows["nccl_profiles"],
        digest=hashlib.sha256(blob.encode("utf-8")).hexdigest(),
        path=directory,
    )


def _cross_check(rows: Mapping[str, tuple[Any, ...]]) -> None:
    """References between tables must resolve, or a decision would silently miss a fact."""
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
    for i, issue in enumerate(rows["driver_issues"], start=1):
        missing = [b for b in issue.good_branches if b not in branches]
        if missing:
            raise GpufixError(
                f"knowledge base: knowledge/driver_issues.yaml row {i} ({issue.id}): "
                f"good branch {missing[0]} is not in driver_branches.yaml"
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
