"""What the user asked of a probe (`gpufix probe` options), checked once, turned into the
program's arguments (one host) or the playbook's variables (multi-node)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpufix.errors import InvalidInput

# As the probe program accepts them (IFNAME_RE, HOST_RE, parse_size in gpufix_probe.py).
_IFNAME = re.compile(r"^[A-Za-z0-9_.:-]{1,15}$")
PYTHON = re.compile(r"[A-Za-z0-9_./+-]{1,4096}")  # the interpreter: one word, no shell
_HOST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.:-]{0,252}$")
_SIZE = re.compile(r"^[0-9]+[KMGkmg]?$")
# A training job's setting (JOB_ENV_* in gpufix_probe.py; the program checks again).
_JOB_ENV = re.compile(
    r"^(NCCL|TORCH_NCCL|TORCH_DISTRIBUTED|GLOO|CUDA|UCX|FI)_[A-Z0-9_]{1,60}=[A-Za-z0-9_.,:/=+^-]{0,200}$"
)
_JOB_ENV_OWNED = ("NCCL_DEBUG", "NCCL_DEBUG_FILE", "NCCL_DEBUG_SUBSYS")
# JOB_ENV_LOADS and JOB_ENV_PLUGINS in gpufix_probe.py (tests/probe keep them equal): a path
# that loads code or is written, as root
JOB_ENV_LOADS = (
    "NCCL_CONF_FILE", "NCCL_TOPO_DUMP_FILE", "NCCL_GRAPH_DUMP_FILE", "CUDA_INJECTION64_PATH",
    "CUDA_CACHE_PATH", "FI_PROVIDER_PATH", "UCX_MODULE_DIR", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE",
)  # fmt: skip
JOB_ENV_PLUGINS = (
    "NCCL_NET_PLUGIN",
    "NCCL_TUNER_PLUGIN",
    "NCCL_PROFILER_PLUGIN",
    "NCCL_ENV_PLUGIN",
)
JOB_ENV_MAX = 32


SOAK_MAX = 1 << 34  # 16G, as check_soak_args in gpufix_probe.py


def size_bytes(text: str) -> int:
    """Bytes from a size _SIZE accepts ("8", "64K", "128M", "1G": binary, as nccl-tests)."""
    shift = {"K": 10, "M": 20, "G": 30}.get(text[-1:].upper(), 0)
    return int(text.rstrip("KMGkmg")) << shift


@dataclass(frozen=True)
class Soak:
    """An all-reduce size sweep like nccl-tests' -b/-e/-f/-n."""

    min_bytes: str = "1K"
    max_bytes: str = "64M"
    factor: int = 4
    iters: int = 20


@dataclass(frozen=True)
class ProbeOptions:
    deadline: int = 120
    phase_deadline: int = 30
    import_deadline: int = 0  # 0: twice the phase deadline
    cpu: bool = False
    world_size: int | None = None  # ranks (per host in a multi-node run)
    python: str | None = None  # the training environment's interpreter on the hosts
    experiments: bool = True
    experiment_budget: int = 180
    soak: Soak | None = None
    ifname: str | None = None
    job_env: tuple[str, ...] = ()  # VAR=VALUE settings the training job runs with
    # the hosts as one multi-node job (gpufix.probe.multinode)
    multi_node: bool = False
    master_addr: str | None = None
    master_port: int = 29500

    def check(self) -> ProbeOptions:
        """Itself, or a one-line InvalidInput for a value the program would refuse."""
        if self.ifname is not None and not _IFNAME.fullmatch(self.ifname):
            raise InvalidInput(f"--ifname {self.ifname!r} is not an interface name")
        if self.master_addr is not None and not _HOST.fullmatch(self.master_addr):
            raise InvalidInput(f"--master-addr {self.master_addr!r} is not an address")
        if self.python is not None and not PYTHON.fullmatch(self.python):
            raise InvalidInput(
                f"--python {self.python[:80]!r}: a path or command name (letters, digits, _ . / + -)"
            )
        self._check_job_env()
        if self.master_addr and not self.multi_node:
            raise InvalidInput("--master-addr is for --multi-node")
        s = self.soak
        if s and not (_SIZE.fullmatch(s.min_bytes) and _SIZE.fullmatch(s.max_bytes)):
            raise InvalidInput("--soak-min-bytes/--soak-max-bytes take sizes like 8, 64K, 128M")
        if s and not 0 < size_bytes(s.min_bytes) <= size_bytes(s.max_bytes) <= SOAK_MAX:
            raise InvalidInput("soak sizes need 0 < --soak-min-bytes <= --soak-max-bytes <= 16G")
        if s and s.factor <= 1 and size_bytes(s.min_bytes) < size_bytes(s.max_bytes):
            raise InvalidInput(
                "--soak-factor 1 never reaches --soak-max-bytes: use a factor above 1"
            )
        return self

    def _check_job_env(self) -> None:
        if len(self.job_env) > JOB_ENV_MAX:
            raise InvalidInput(f"--job-env: at most {JOB_ENV_MAX} settings")
        names = [item.partition("=")[0] for item in self.job_env]
        for item, name in zip(self.job_env, names, strict=True):
            if not _JOB_ENV.fullmatch(item):
                raise InvalidInput(
                    f"--job-env {item[:80]!r}: want VAR=VALUE, VAR one of NCCL_*, TORCH_NCCL_*, "
                    "TORCH_DISTRIBUTED_*, GLOO_*, CUDA_*, UCX_*, FI_*, VALUE without blanks, "
                    "quotes or braces"
                )
            if name in _JOB_ENV_OWNED:
                raise InvalidInput(f"--job-env {name}: the probe sets it (its NCCL log)")
            value = item.partition("=")[2]
            if name in JOB_ENV_LOADS or (name in JOB_ENV_PLUGINS and "/" in value):
                raise InvalidInput(
                    f"--job-env {name}: it loads code from, or writes, a path the job names; "
                    "the probe runs as root and takes no such setting"
                )
            if names.count(name) > 1:
                raise InvalidInput(f"--job-env {name} given twice")

    def total_s(self) -> int:
        """The longest the program may take by its own deadlines."""
        return self.deadline + (self.experiment_budget if self.experiments else 0)

    def program_args(self) -> list[str]:
        """Arguments of gpufix_probe.py for a probe of one host."""
        args = ["--deadline", str(self.deadline), "--phase-deadline", str(self.phase_deadline)]
        if self.import_deadline:
            args += ["--import-deadline", str(self.import_deadline)]
        if self.cpu:
            args.append("--cpu")
        if self.world_size:
            args += ["--world-size", str(self.world_size)]
        elif self.cpu:
            # two CPU ranks, as roles/probe and the multi-node probe run --cpu: one rank tests
            # no collective between processes
            args += ["--world-size", "2"]
        if self.experiments:
            args += ["--experiment-budget", str(self.experiment_budget)]
        else:
            args.append("--no-experiments")
        if self.ifname:
            args += ["--ifname", self.ifname]
        args += [f"--job-env={item}" for item in self.job_env]
        if self.soak:
            args += ["--soak", "--soak-min-bytes", self.soak.min_bytes]
            args += ["--soak-max-bytes", self.soak.max_bytes]
            args += ["--soak-factor", str(self.soak.factor), "--soak-iters", str(self.soak.iters)]
        return args
