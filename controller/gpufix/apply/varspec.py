"""What a variable gpufix hands to a playbook may hold (checked by gpufix.apply.rolevars).

Types and choices come from each role's meta/argument_specs.yml; this module adds what those
specs cannot say: value patterns, the variables a plan step may never set, and the variables of
the shared playbooks (probe, reboot, rollback, host check, uninstall), which have no role.
Every string is also passed as !unsafe (never templated): these checks are the second wall.
"""

from __future__ import annotations

from typing import Any

# Value patterns, by name. Anchored; none admits "{", "%", quotes, spaces or newlines (except
# `text`, which refuses Jinja delimiters), so no value carries Jinja or a second shell word.
PATTERNS: dict[str, str] = {
    "abspath": r"^/[A-Za-z0-9._+/-]{0,4095}$",
    # an interpreter gpufix runs on a host: an absolute path whose last part is python[X[.Y]]
    "python": r"^/([A-Za-z0-9._+-]+/){0,64}python[0-9.]{0,8}$",
    # Debian Policy 5.6.1: package names are [a-z0-9][a-z0-9+.-]+
    "package": r"^[a-z0-9][a-z0-9+.-]{1,127}$",
    # Debian Policy 5.6.12: [epoch:]upstream[-revision] from [A-Za-z0-9.+~:-]
    "deb_version": r"^[0-9][A-Za-z0-9.+~:-]{0,127}$",
    # PEP 440 versions as the ML stack pins them (2.1.2, 4.36.2, 2.1.0a0)
    "py_version": r"^[0-9][A-Za-z0-9.+!-]{0,63}$",
    # kernel releases as `uname -r` prints them (5.4.0-150-generic)
    "kernel_release": r"^[0-9]+\.[0-9]+\.[0-9]+[A-Za-z0-9.+_-]{0,64}$",
    "driver_branch": r"^[0-9]{3,4}$",
    "driver_version": r"^[0-9]{3,4}(\.[0-9]{1,3}){1,2}$",
    "cuda_version": r"^[0-9]{1,2}\.[0-9]{1,2}$",
    "cuda_major": r"^[0-9]{1,2}$",
    "torch_variant": r"^(cpu|cu[0-9]{2,4}|rocm[0-9.]{1,8})$",
    "https_url": r"^https://[A-Za-z0-9._~:/?&=+%@-]{1,2000}$",
    # repo[:tag]@sha256:<64 hex>
    "image_digest": r"^[a-z0-9][a-z0-9._/:-]{0,254}@sha256:[0-9a-f]{64}$",
    "size": r"^[0-9]{1,6}[bkmg]?$",
    # VMD domains run past four hex digits (10000:e0:1a.0); pciutils takes 32-bit domains
    "pci_bdf": r"^([0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]|auto)$",
    "kernel_param": r"^[a-z0-9_.]{1,64}(=[A-Za-z0-9_.,:-]{1,64})?$",
    # NCCL_SOCKET_IFNAME's syntax: prefixes, "^" to exclude, "=" for exact names
    "ifname_list": r"^\^?=?[A-Za-z0-9_.:-]{1,15}(,[A-Za-z0-9_.:-]{1,15}){0,15}$",
    "store_key": r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$",
    # the fields of the host lock's record (gpufix.apply.hostlock)
    "lock_field": r"^(token|owner|pid|pid_start|since)$",
    "lock_token": r"^[0-9a-f]{32}$",
    # a login name as useradd takes it (shadow-utils' default NAME_REGEX, plus digits first)
    "account": r"^[a-z0-9_][a-z0-9_.-]{0,31}$",
    # an inventory host name, as the plan schema's "host"
    "inventory_host": r"^[A-Za-z0-9_][A-Za-z0-9_.:@-]{0,252}$",
    "nccl_profile": r"^[a-z0-9-]{1,32}$",
    "nccl_key": r"^NCCL_[A-Z0-9_]{1,64}$",
    "nccl_value": r"^[A-Za-z0-9_.,:/=+-]{0,256}$",
    # a training job's setting for the probe (gpufix_probe.py JOB_ENV_NAME_RE, JOB_ENV_VALUE_RE)
    # not a setting that loads code from, or writes, a path (JOB_ENV_LOADS, JOB_ENV_PLUGINS)
    "job_env": r"^(?!(NCCL_CONF_FILE|NCCL_TOPO_DUMP_FILE|NCCL_GRAPH_DUMP_FILE|"
    r"CUDA_INJECTION64_PATH|CUDA_CACHE_PATH|FI_PROVIDER_PATH|UCX_MODULE_DIR|"
    r"TORCH_NCCL_DEBUG_INFO_TEMP_FILE)=)"
    r"(?!(NCCL_NET_PLUGIN|NCCL_TUNER_PLUGIN|NCCL_PROFILER_PLUGIN|NCCL_ENV_PLUGIN)=[^/]*/)"
    r"(NCCL|TORCH_NCCL|TORCH_DISTRIBUTED|GLOO|CUDA|UCX|FI)_[A-Z0-9_]{1,60}"
    r"=[A-Za-z0-9_.,:/=+^-]{0,200}$",
    "pip_pin": r"^[A-Za-z0-9._-]{1,100}==[0-9][A-Za-z0-9.+!-]{0,63}$",
    "file_mode": r"^[0-7]{3,4}$",
    "base64": r"^[A-Za-z0-9+/=]{0,400000}$",
    # plain text: no Jinja delimiters, no control characters
    "text": r"^(?!.*(\{\{|\{%|\{#))[^\x00-\x1f\x7f]{0,4096}$",
}

# Pattern per variable (for a list: per element). Each should move into the role's
# meta/argument_specs.yml as far as Ansible's spec language allows (docs/security.md).
VAR_PATTERNS: dict[str, str] = {
    "gpufix_kernel_packages": "package",
    "gpufix_kernel_target": "kernel_release",
    "gpufix_ml_stack_venv": "abspath",
    "gpufix_ml_stack_python": "python",
    "gpufix_ml_stack_torch_version": "py_version",
    "gpufix_ml_stack_torch_variant": "torch_variant",
    "gpufix_ml_stack_transformers_version": "py_version",
    "gpufix_ml_stack_accelerate_version": "py_version",
    "gpufix_ml_stack_extra_requirements": "pip_pin",
    "gpufix_ml_stack_index_url": "https_url",
    "gpufix_ml_stack_torch_index_url": "https_url",
    "gpufix_ml_stack_wheelhouse": "abspath",
    "gpufix_ml_stack_pip_minimum": "py_version",
    "gpufix_driver_branch": "driver_branch",
    "gpufix_driver_version": "driver_version",
    "gpufix_driver_min_version": "driver_version",
    "gpufix_driver_kernel_release": "kernel_release",
    "gpufix_ml_stack_driver_version": "driver_version",
    "gpufix_container_runtime_image": "image_digest",
    "gpufix_container_runtime_default_shm_size": "size",
    "gpufix_container_runtime_shm_size": "size",
    "gpufix_container_runtime_docker_version": "deb_version",
    "gpufix_container_runtime_toolkit_version": "deb_version",
    "gpufix_nccl_profile_names": "nccl_profile",
    "gpufix_nccl_profile_socket_ifname": "ifname_list",
    "gpufix_nccl_profile_drop": "nccl_key",
    "gpufix_pcie_acs_bridges": "pci_bdf",
    "gpufix_pcie_acs_iommu_flags": "kernel_param",
    # shared playbooks
    "gpufix_probe_python": "python",
    "gpufix_probe_pythonpath": "abspath",
    "gpufix_probe_user": "account",
    "gpufix_probe_job_env": "job_env",
    "gpufix_probe_store_key": "store_key",
    "gpufix_host_lock_takeover": "lock_token",
    "gpufix_probe_run_id": "store_key",
    "gpufix_probe_nodes": "inventory_host",
    "gpufix_rollback_kernel": "kernel_release",
    "gpufix_rollback_remove": "package",
    "gpufix_rollback_unhold": "package",
    "gpufix_rollback_hold": "package",
    "gpufix_preflight_files": "abspath",
    "gpufix_uninstall_paths": "abspath",
}
# Inclusive bounds of integer variables (others: |n| <= 10**9).
INT_RANGES: dict[str, tuple[int, int]] = {
    # bytes of a file the host check saves: at most what the journal's content_b64 holds
    # (the `base64` pattern's 400000 characters are 300000 bytes)
    "gpufix_preflight_save_limit": (1, 300000),
    # seconds; apply's --reboot-timeout allows at most a day
    "gpufix_host_lock_wait": (0, 86400),
}
# What rollback.yml takes of a saved file (gpufix.apply.rollback passes no more; the host check
# also records the owner's and group's names, for people reading the journal).
SAVED_FILE_KEYS = ("exists", "mode", "content_b64", "uid", "gid")
# The largest owner or group id a saved file may be given back: ids are 32-bit, and
# 4294967295 ((uid_t)-1) tells chown "leave it as it is".
FILE_ID_MAX = 4294967294
# (key pattern, value pattern) of dict variables
DICT_PATTERNS: dict[str, tuple[str, str]] = {
    "gpufix_nccl_profile_extra": ("nccl_key", "nccl_value"),
    "gpufix_ml_stack_cuda_driver_floor": ("cuda_major", "driver_version"),
    "gpufix_rollback_install": ("package", "deb_version"),
    "gpufix_rollback_files": ("abspath", "saved_file"),
    "gpufix_preflight_probe_python": ("inventory_host", "python"),
    "gpufix_host_lock_holder": ("lock_field", "text"),
}
# "" means "the role's default" for these.
ALLOW_EMPTY = frozenset(
    {
        "gpufix_kernel_target",
        "gpufix_ml_stack_wheelhouse",
        "gpufix_probe_pythonpath",
        "gpufix_probe_user",
        "gpufix_probe_store_key",
        "gpufix_host_lock_takeover",
        "gpufix_rollback_kernel",
        "gpufix_container_runtime_image",
        "gpufix_container_runtime_default_shm_size",
        "gpufix_nccl_profile_socket_ifname",
        "gpufix_driver_version",
        "gpufix_driver_min_version",
        "gpufix_ml_stack_driver_version",
        "gpufix_container_runtime_docker_version",
        "gpufix_container_runtime_toolkit_version",
        "gpufix_ml_stack_torch_variant",
        "gpufix_ml_stack_pip_minimum",
    }
)

# A plan step never sets these, whatever the role allows: the commands a host runs, repository
# trust, and where files go belong to the inventory owner, not to a plan.
NEVER_IN_PLAN: tuple[str, ...] = (
    r"_command$",
    r"_trusted$",
    r"_repo_uri$",
    r"_key_url$",
    r"_signed_by$",
    r"_path$",
    r"_file$",
    r"_extra_args$",
    r"_setting$",
    r"_dest$",
    r"_wheelhouse$",
)

# Variables a playbook takes beside its roles' argument specs.
ROLE_EXTRAS: dict[str, dict[str, dict[str, Any]]] = {
    "probe_multinode.yml": {"gpufix_probe_nodes": {"type": "list", "elements": "str"}},
}

# Variables of the shared playbooks that run no role, in argument_specs form (probe.yml and
# probe_multinode.yml take the probe role's own argument specs, see ROLE_EXTRAS).
SHARED: dict[str, dict[str, dict[str, Any]]] = {
    "reboot.yml": {"gpufix_reboot_timeout": {"type": "int"}},
    "host_check.yml": {
        "gpufix_preflight_dpkg_wait": {"type": "int"},
        "gpufix_preflight_files": {"type": "list", "elements": "str"},
        "gpufix_preflight_save_limit": {"type": "int"},
        "gpufix_preflight_probe_check": {"type": "bool"},
        "gpufix_preflight_probe_python": {"type": "dict"},
        # the probe role's own, given to apply with the other probe options
        "gpufix_probe_pythonpath": {"type": "str"},
        "gpufix_probe_trust_interpreter": {"type": "bool"},
    },
    "rollback.yml": {
        "gpufix_rollback_install": {"type": "dict"},
        "gpufix_rollback_remove": {"type": "list", "elements": "str"},
        "gpufix_rollback_unhold": {"type": "list", "elements": "str"},
        "gpufix_rollback_hold": {"type": "list", "elements": "str"},
        "gpufix_rollback_files": {"type": "dict"},
        "gpufix_rollback_kernel": {"type": "str"},
        "gpufix_rollback_reboot": {"type": "bool"},
        "gpufix_rollback_reboot_after": {"type": "bool"},
        "gpufix_rollback_ml_venv_remove": {"type": "bool"},
        "gpufix_reboot_timeout": {"type": "int"},
    },
    "uninstall.yml": {"gpufix_uninstall_paths": {"type": "list", "elements": "str"}},
    "host_lock.yml": {
        "gpufix_host_lock_action": {"type": "str", "choices": ["take", "release", "peek"]},
        "gpufix_host_lock_holder": {"type": "dict"},
        "gpufix_host_lock_takeover": {"type": "str"},
        "gpufix_host_lock_wait": {"type": "int"},
    },
    "probe_stop.yml": {
        "gpufix_probe_store_key": {"type": "str"},
        "gpufix_probe_run_id": {"type": "str"},
    },
}
