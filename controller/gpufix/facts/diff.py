"""Compare hosts' facts: the aspects that matter for multi-GPU start-up hangs, side by side.

`compare` reads one value per aspect and host (kernel, driver, torch and its CUDA/NCCL, P2P,
ACS/IOMMU, /dev/shm, NCCL settings, container...), differences first, hosts that differ most
from the rest first. `diff_all` is the raw view: every flattened fact path that differs,
identifiers and per-cell matrices included.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpufix.facts.host import from_facts
from gpufix.facts.snapshot import is_unknown

Facts = Mapping[str, Any]
MISSING = "-"
# Fact paths the raw view leaves out: they change on every run or describe gpufix itself.
IGNORED = ("module_version", "gpu_processes", "kernel_log", "python")


@dataclass(frozen=True)
class Aspect:
    key: str
    label: str
    why: str  # one line: why a difference here can decide a start-up hang
    read: Callable[[Facts], str]


@dataclass(frozen=True)
class Row:
    key: str
    label: str
    why: str
    values: tuple[str, ...]  # one per host, in Comparison.hosts order

    @property
    def differs(self) -> bool:
        return len(set(self.values)) > 1


@dataclass(frozen=True)
class Comparison:
    hosts: tuple[str, ...]
    rows: tuple[Row, ...]  # differences first, then the rest, each in ASPECTS order

    @property
    def differences(self) -> tuple[Row, ...]:
        return tuple(r for r in self.rows if r.differs)

    def to_dict(self) -> dict[str, Any]:
        def row(r: Row) -> dict[str, Any]:
            return {
                "key": r.key,
                "label": r.label,
                "why": r.why,
                "values": dict(zip(self.hosts, r.values, strict=True)),
            }

        return {
            "format": "gpufix-diff",
            "version": 1,
            "hosts": list(self.hosts),
            "differences": [row(r) for r in self.rows if r.differs],
            "same": [row(r) for r in self.rows if not r.differs],
        }


# ------------------------------------------------------------------------------ reading facts


def _at(facts: Facts, path: str) -> Any:
    """The value at a dotted path; MISSING when absent, the unknown marker when unknown."""
    node: Any = facts
    for part in path.split("."):
        if is_unknown(node):
            return node
        if not isinstance(node, Mapping) or part not in node:
            return MISSING
        node = node[part]
    return node


def _text(v: Any) -> str:
    if is_unknown(v):
        return f"unknown ({v['unknown']})"
    if v is None or v == "":
        return MISSING
    if isinstance(v, bool):
        return "yes" if v else "no"
    return str(v)


def _path(path: str) -> Callable[[Facts], str]:
    return lambda f: _text(_at(f, path))


def _os(f: Facts) -> str:
    pretty = _at(f, "os.pretty_name")
    return _text(pretty) if isinstance(pretty, str) else _text(_at(f, "os.version_id"))


def _fabricmanager(f: Facts) -> str:
    fm = _at(f, "fabricmanager")
    if not isinstance(fm, Mapping):
        return _text(fm)
    version = _text(fm.get("installed"))
    if version == MISSING:
        return "not installed"
    return f"{version} ({'running' if fm.get('running') is True else 'not running'})"


def _gpus(f: Facts) -> str:
    gpus = _at(f, "gpus")
    if not isinstance(gpus, list):
        return _text(gpus)
    if not gpus:
        return "none"
    names = Counter(
        g["name"] if isinstance(g, Mapping) and isinstance(g.get("name"), str) else "?"
        for g in gpus
    )
    return ", ".join(f"{n} × {name}" for name, n in sorted(names.items()))


def _p2p(f: Facts) -> str:
    read = _at(f, "p2p.read")
    if not isinstance(read, Mapping):
        return _text(read)
    cells = [
        str(v)
        for row in read.values()
        if isinstance(row, Mapping)
        for v in row.values()
        if str(v) != "X"
    ]
    if not cells:
        return MISSING
    counts = Counter(cells)
    if len(counts) == 1:
        return f"{cells[0]} (all {len(cells)} pairs)"
    return ", ".join(f"{v} {n}/{len(cells)}" for v, n in counts.most_common())


def _topology(f: Facts) -> str:
    worst = from_facts(f).worst_link
    topology = _at(f, "topology")
    return worst or (_text(topology) if is_unknown(topology) else MISSING)


def _acs(f: Facts) -> str:
    bridges = _at(f, "pcie.bridges")
    if not isinstance(bridges, list):
        return _text(bridges)
    on = from_facts(f).acs_bridges
    return f"redirect on ({len(on)} bridges)" if on else "off above the GPUs"


def _iommu(f: Facts) -> str:
    mode = _text(_at(f, "iommu.mode"))
    flags = _at(f, "iommu.cmdline")
    if isinstance(flags, Mapping) and not is_unknown(flags):
        set_ = [f"{k}={v}" for k, v in sorted(flags.items()) if v not in (None, "")]
        if set_:
            return f"{mode} ({' '.join(set_)})"
    return mode


def _cuda_toolkit(f: Facts) -> str:
    default = _at(f, "cuda_default")
    if isinstance(default, Mapping):
        return _text(default.get("version"))
    return "none" if default is None else _text(default)


def _env(f: Facts) -> Mapping[str, Any] | None:
    """The Python environment training runs in: the first with torch (facts/host.py's rule)."""
    envs = _at(f, "python_envs")
    if not isinstance(envs, list):
        return None
    good = [e for e in envs if isinstance(e, Mapping)]
    with_torch = [
        e for e in good if isinstance(e.get("packages"), Mapping) and e["packages"].get("torch")
    ]
    chosen = with_torch or good
    return chosen[0] if chosen else None


def _package(name: str) -> Callable[[Facts], str]:
    def read(f: Facts) -> str:
        env = _env(f)
        if env is None:
            return _text(_at(f, "python_envs"))
        packages = env.get("packages")
        return _text(packages.get(name) if isinstance(packages, Mapping) else packages)

    return read


def _python(f: Facts) -> str:
    env = _env(f)
    if env is None:
        return _text(_at(f, "python_envs"))
    return f"{_text(env.get('version'))} {_text(env.get('python'))}"


def _torch_nccl(f: Facts) -> str:
    env = _env(f)
    packages = env.get("packages") if env is not None else None
    if isinstance(packages, Mapping):
        wheels = [
            f"{k} {v}"
            for k, v in sorted(packages.items())
            if k.startswith("nvidia-nccl") and isinstance(v, str) and v
        ]
        if wheels:
            return ", ".join(wheels)
    return _text(_at(f, "nccl.env.NCCL_VERSION"))


def _shm(f: Facts) -> str:
    size = _at(f, "shm.size_bytes")
    if isinstance(size, int) and not isinstance(size, bool):
        return f"{size / (1 << 30):.1f} GiB" if size >= 1 << 30 else f"{size >> 20} MiB"
    return _text(size)


def _nccl_settings(f: Facts) -> str:
    out = []
    files = _at(f, "nccl.files")
    if isinstance(files, Mapping):
        for where, kv in sorted(files.items()):
            if isinstance(kv, Mapping):
                out += [f"{k}={v} ({where})" for k, v in sorted(kv.items())]
    env = _at(f, "nccl.env")
    if isinstance(env, Mapping):
        out += [f"{k}={v}" for k, v in sorted(env.items()) if k != "NCCL_VERSION"]
    return ", ".join(out) or "none"


def _environment(f: Facts) -> str:
    env = _at(f, "env")
    if not isinstance(env, Mapping):
        return _text(env)
    set_ = [f"{k}={_text(v)}" for k, v in sorted(env.items()) if v is not None]
    return ", ".join(set_) or "nothing relevant set"


def _flag(value: Any, yes: str, no: str, unknown: str) -> str:
    return yes if value is True else no if value is False else unknown


def _container(f: Facts) -> str:
    c = _at(f, "containers")
    if not isinstance(c, Mapping):
        return _text(c)
    if c.get("in_container") is not True:
        return _text(c.get("in_container"))
    ipc = _flag(c.get("ipc_host"), "ipc=host", "private ipc", "ipc ?")
    net = _flag(c.get("net_host"), "net=host", "private network", "network ?")
    return f"yes ({ipc}, {net})"


ASPECTS: tuple[Aspect, ...] = (
    Aspect("os", "OS", "sets the newest HWE kernel, glibc and driver packages", _os),
    Aspect("kernel", "kernel", "accelerate warns below 5.5; needs an NVIDIA module built for it", _path("kernel.running")),
    Aspect("driver_module", "driver (module)", "must equal user space, or NVML reports a mismatch", _path("driver.kernel_module")),
    Aspect("driver_userspace", "driver (user space)", "the branch caps torch's CUDA; some branches hang", _path("driver.userspace")),
    Aspect("fabricmanager", "fabric manager", "NVSwitch: NCCL init stalls unless it matches the driver", _fabricmanager),
    Aspect("gpus", "GPUs", "architecture picks the torch wheels that run", _gpus),
    Aspect("p2p", "P2P support", "no P2P: NCCL_P2P_DISABLE=1 is the fix, else a workaround", _p2p),
    Aspect("topology", "topology (worst)", "PIX/PXB (a PCIe switch) is where ACS breaks P2P", _topology),
    Aspect("acs", "PCIe ACS", "redirect above GPUs bounces P2P: hangs or slow P2P", _acs),
    Aspect("iommu", "IOMMU", "translated mode can break P2P; NCCL asks pt or off", _iommu),
    Aspect("cuda_toolkit", "CUDA toolkit", "what extensions build against (torch has its own)", _cuda_toolkit),
    Aspect("python", "Python (training)", "the environment the job runs in", _python),
    Aspect("torch", "torch", "its CUDA needs a minimum driver and GPU architecture", _package("torch")),
    Aspect("torch_nccl", "NCCL", "NCCL versions both fix and cause start-up hangs", _torch_nccl),
    Aspect("transformers", "transformers", "pins the torch range it supports", _package("transformers")),
    Aspect("accelerate", "accelerate", "0.24.0+ prints the kernel warning", _package("accelerate")),
    Aspect("glibc", "glibc", "torch 2.7+ needs 2.28 (Ubuntu 18.04 has 2.27)", _path("glibc")),
    Aspect("shm", "/dev/shm", "NCCL's shared memory fails in Docker's 64 MiB", _shm),
    Aspect("nccl_settings", "NCCL settings", "leftover P2P/debug knobs change what NCCL does", _nccl_settings),
    Aspect("env", "environment", "a wrong CUDA_VISIBLE_DEVICES hides GPUs", _environment),
    Aspect("container", "container", "needs --ipc=host or big /dev/shm; host net across nodes", _container),
)  # fmt: skip


def _odd_first(hosts: Sequence[str], rows: Sequence[Row]) -> list[int]:
    """Host order: the ones that differ most often from the majority value come first."""
    score = [0] * len(hosts)
    for r in rows:
        majority, n = Counter(r.values).most_common(1)[0]
        if n * 2 <= len(hosts):  # no majority: no host is the odd one on this row
            continue
        for i, v in enumerate(r.values):
            score[i] += v != majority
    return sorted(range(len(hosts)), key=lambda i: (-score[i], i))


def compare(named: Sequence[tuple[str, Facts]]) -> Comparison:
    """Side by side, what matters for start-up hangs; for three or more hosts, odd ones first."""
    names = [n for n, _ in named]
    rows = [Row(a.key, a.label, a.why, tuple(a.read(f) for _, f in named)) for a in ASPECTS]
    order = _odd_first(names, rows) if len(names) > 2 else list(range(len(names)))
    rows = [Row(r.key, r.label, r.why, tuple(r.values[i] for i in order)) for r in rows]
    rows.sort(key=lambda r: not r.differs)  # stable: ASPECTS order within each part
    return Comparison(tuple(names[i] for i in order), tuple(rows))


# ------------------------------------------------------------------------------ the raw view


def flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    if is_unknown(obj):
        return {prefix: f"unknown ({obj['unknown']})"}
    if isinstance(obj, Mapping):
        out: dict[str, Any] = {}
        for k, v in obj.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    if isinstance(obj, list) and obj and all(isinstance(x, Mapping) for x in obj):
        out = {}
        for i, x in enumerate(obj):
            key = str(x.get("index", x.get("python", x.get("path", i))))
            out.update(flatten(x, f"{prefix}[{key}]"))
        return out
    return {prefix: obj}


def ignored(path: str) -> bool:
    """A whole top-level fact, not a prefix: `python` is ignored, `python_envs` is not."""
    return any(path == p or path.startswith((p + ".", p + "[")) for p in IGNORED)


def diff_all(named: Sequence[tuple[str, Facts]]) -> list[tuple[str, tuple[Any, ...]]]:
    """Every fact path whose value is not the same on all hosts: (path, values per host)."""
    flat = [{k: v for k, v in flatten(f).items() if not ignored(k)} for _, f in named]
    paths = sorted(set().union(*flat))
    out = []
    for p in paths:
        values = tuple(fl.get(p, MISSING) for fl in flat)
        if any(v != values[0] for v in values[1:]):
            out.append((p, values))
    return out
