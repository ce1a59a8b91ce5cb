"""Every role's meta/argument_specs.yml agrees with its defaults/main.yml.

For each role under roles/: every default is described, every described option without
`required: true` has a default, the spec's `default:` equals the real default, names carry the
role's prefix, and each option has a type and a description.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from gpufix.facts.local import load_module

ROLES = Path(__file__).resolve().parent.parent / "roles"
TYPES: dict[str, tuple[type, ...]] = {
    "str": (str,),
    "int": (int,),
    "bool": (bool,),
    "float": (float, int),
    "list": (list,),
    "dict": (dict,),
    "path": (str,),
    "raw": (object,),
}


def role_names() -> list[str]:
    return (
        sorted(p.name for p in ROLES.iterdir() if (p / "tasks").is_dir()) if ROLES.is_dir() else []
    )


def _load(path: Path) -> Any:
    return yaml.safe_load(path.read_text()) if path.is_file() else None


def _spec(role: str) -> dict[str, Any]:
    data = _load(ROLES / role / "meta" / "argument_specs.yml")
    assert isinstance(data, dict), f"{role}: meta/argument_specs.yml missing or empty"
    main = data.get("argument_specs", {}).get("main")
    assert isinstance(main, dict), f"{role}: argument_specs.main missing"
    assert main.get("short_description"), f"{role}: argument_specs.main.short_description missing"
    return main.get("options") or {}


def _defaults(role: str) -> dict[str, Any]:
    return _load(ROLES / role / "defaults" / "main.yml") or {}


def test_roles_exist() -> None:
    assert role_names(), "no roles under roles/"


@pytest.mark.parametrize("role", role_names())
def test_defaults_and_spec_name_the_same_variables(role: str) -> None:
    options, defaults = _spec(role), _defaults(role)
    undocumented = sorted(set(defaults) - set(options))
    assert not undocumented, f"{role}: defaults not in argument_specs: {undocumented}"
    missing = sorted(k for k, v in options.items() if k not in defaults and not v.get("required"))
    assert not missing, (
        f"{role}: optional options without a default in defaults/main.yml: {missing}"
    )
    required_with_default = sorted(
        k for k, v in options.items() if v.get("required") and k in defaults
    )
    assert not required_with_default, (
        f"{role}: required options with a default: {required_with_default}"
    )


@pytest.mark.parametrize("role", role_names())
def test_spec_defaults_match(role: str) -> None:
    options, defaults = _spec(role), _defaults(role)
    for name, option in options.items():
        if name in defaults and "default" in option:
            assert option["default"] == defaults[name], (
                f"{role}: {name}: argument_specs default {option['default']!r} "
                f"!= defaults/main.yml {defaults[name]!r}"
            )


@pytest.mark.parametrize("role", role_names())
def test_options_typed_described_prefixed(role: str) -> None:
    prefix = f"gpufix_{role}_"
    for name, option in _spec(role).items():
        assert name.startswith(prefix), f"{role}: {name} lacks the prefix {prefix}"
        assert option.get("description"), f"{role}: {name} has no description"
        kind = option.get("type", "str")
        assert kind in TYPES, f"{role}: {name}: unknown type {kind!r}"
        default = _defaults(role).get(name)
        is_template = isinstance(default, str) and "{{" in default
        if default is not None and not is_template:
            assert isinstance(default, TYPES[kind]), (
                f"{role}: {name}: default {default!r} is not a {kind}"
            )
            if kind in ("int", "float"):
                assert not isinstance(default, bool), f"{role}: {name}: bool given for {kind}"
        if "choices" in option and default is not None and not is_template:
            values = default if kind == "list" else [default]
            bad = [v for v in values if v not in option["choices"]]
            assert not bad, f"{role}: {name}: default {bad} not among choices {option['choices']}"


DOCS = ROLES.parent / "docs" / "roles.md"


def _doc_section(role: str) -> str | None:
    if not DOCS.is_file():
        return None
    text = DOCS.read_text()
    marker = f"\n## {role}\n"
    if marker not in text:
        return None
    body = text.split(marker, 1)[1]
    return body.split("\n## ", 1)[0]


@pytest.mark.parametrize("role", role_names())
def test_documented_roles_list_every_option(role: str) -> None:
    section = _doc_section(role)
    assert section is not None, f"docs/roles.md has no `## {role}` section"
    missing = sorted(name for name in _spec(role) if f"`{name}`" not in section)
    assert not missing, f"docs/roles.md section {role} lacks: {missing}"


# -- one tag convention ------------------------------------------------------------------------
# Every role tags its tasks with the role-wide tag gpufix_<role> plus one phase tag
# gpufix_<role>_<phase>; preflight (and loading the OS vars) carries every phase tag, so that
# `--tags gpufix_<role>_<phase>` never skips the checks. A phase the controller runs only on
# purpose (the kernel's finalize) adds Ansible's `never` tag.


def _main_tasks(role: str) -> list[dict[str, Any]]:
    tasks = _load(ROLES / role / "tasks" / "main.yml")
    assert isinstance(tasks, list), f"{role}: tasks/main.yml is not a task list"
    return tasks


def _tags(task: dict[str, Any]) -> list[str]:
    tags = task.get("tags") or []
    return [tags] if isinstance(tags, str) else list(tags)


def tag_problems(role: str, tasks: list[dict[str, Any]]) -> list[str]:
    """What in a role's tasks/main.yml breaks the tag convention (empty when none)."""
    prefix = f"gpufix_{role}_"
    phases = {t for task in tasks for t in _tags(task) if t.startswith(prefix)}
    problems = []
    for task in tasks:
        name, tags = task.get("name", "?"), _tags(task)
        if "always" in tags:
            problems.append(f"{name!r} is tagged always (tag it with every phase instead)")
        if f"gpufix_{role}" not in tags:
            problems.append(f"{name!r} lacks the role-wide tag gpufix_{role}")
        if not any(t.startswith(prefix) for t in tags):
            problems.append(f"{name!r} has no phase tag {prefix}<phase>")
    preflight = [t for t in tasks if f"{prefix}preflight" in _tags(t)]
    if not preflight:
        problems.append(f"no task tagged {prefix}preflight")
    for task in preflight:
        missing = sorted(phases - set(_tags(task)))
        if missing:
            problems.append(f"preflight {task.get('name')!r} lacks the phase tags {missing}")
    return problems


@pytest.mark.parametrize("role", role_names())
def test_tag_convention(role: str) -> None:
    assert tag_problems(role, _main_tasks(role)) == []


def test_tag_convention_catches_a_preflight_that_a_phase_skips() -> None:
    # The ml_stack role as it was: `--tags gpufix_ml_stack_install` skipped its preflight.
    tasks = [
        {"name": "Preflight", "tags": ["gpufix_ml_stack", "gpufix_ml_stack_preflight"]},
        {"name": "Install", "tags": ["gpufix_ml_stack", "gpufix_ml_stack_install"]},
    ]
    assert tag_problems("ml_stack", tasks) == [
        "preflight 'Preflight' lacks the phase tags ['gpufix_ml_stack_install']"
    ]


# -- nccl_profile and the knowledge base share one list of profiles ----------------------------
def _kb_profiles() -> list[dict[str, Any]]:
    found = sorted(ROLES.parent.glob("controller/gpufix/**/knowledge/nccl_profiles.yaml"))
    assert len(found) == 1, f"expected one knowledge-base nccl_profiles.yaml, found {found}"
    data = _load(found[0])
    assert isinstance(data, list)
    return data


def _role_profiles() -> dict[str, Any]:
    data = _load(ROLES / "nccl_profile" / "vars" / "main.yml")
    return data["_gpufix_nccl_profile_catalogue"]


def test_nccl_profiles_role_and_knowledge_base_agree() -> None:
    kb, role = _kb_profiles(), _role_profiles()
    assert [p["name"] for p in kb] == list(role), "same names in the same order"
    for p in kb:
        mine = role[p["name"]]
        assert bool(p.get("debug")) == bool(mine.get("debug")), p["name"]
        assert sorted(p["settings"]) == sorted(mine["settings"]), p["name"]
        for key, value in p["settings"].items():
            # The interface is filled in per host: the KB has a placeholder, the role a variable.
            if key != "NCCL_SOCKET_IFNAME":
                assert str(value) == str(mine["settings"][key]), f"{p['name']}: {key}"


def test_nccl_profile_texts_hold_no_equals_sign() -> None:
    # They become comment lines of /etc/nccl.conf, which NCCL before 2.26.2 parses when they
    # hold "=" (NVIDIA/nccl#1540).
    for name, profile in _role_profiles().items():
        for label in ("when", "cost", "source"):
            assert "=" not in str(profile[label]), f"{name}: {label}"


def test_ml_stack_driver_floors_match_the_knowledge_base() -> None:
    found = sorted(ROLES.parent.glob("controller/gpufix/**/knowledge/cuda_minor_compat.yaml"))
    assert len(found) == 1, found
    kb = {str(row["major"]): str(row["floor"]) for row in _load(found[0])}
    role = _load(ROLES / "ml_stack" / "vars" / "main.yml")["_gpufix_ml_stack_cuda_driver_floor"]
    assert role == kb


def test_hwe_metapackages_match_the_knowledge_base() -> None:
    # The same table lives in three places: the knowledge base, the kernel role's vars and the
    # facts module (which runs on the target with the standard library only).
    found = sorted(ROLES.parent.glob("controller/gpufix/**/knowledge/ubuntu.yaml"))
    assert len(found) == 1, found
    kb = {
        str(r["version_id"]): (str(r["codename"]), r["hwe_metapackage"])
        for r in _load(found[0])
        if r.get("distro", "ubuntu") == "ubuntu" and r.get("hwe_metapackage")
    }
    module = load_module()
    assert {codename: meta for codename, meta in kb.values()} == module.HWE_METAPACKAGES
    for version, (_, meta) in kb.items():
        role = _load(ROLES / "kernel" / "vars" / f"Ubuntu-{version}.yml")
        assert role["_gpufix_kernel_hwe_packages"][0] == meta, version
        assert role["_gpufix_kernel_image_metapackage"] == meta.replace(
            "linux-generic", "linux-image-generic"
        )


def test_ml_stack_torch_wheels_match_the_knowledge_base() -> None:
    found = sorted(ROLES.parent.glob("controller/gpufix/**/knowledge/torch_releases.yaml"))
    assert len(found) == 1, found
    kb: dict[str, dict] = {}
    for row in _load(found[0]):
        minor = ".".join(str(row["version"]).split(".")[:2])
        need = {"python": [row["python_min"], row["python_max"]], "glibc": row["glibc_min"]}
        if row.get("cuda_glibc"):
            need["cuda_glibc"] = row["cuda_glibc"]
        # patch releases of one minor publish the same Pythons and glibc floor
        assert kb.setdefault(minor, need) == need, minor
    role = _load(ROLES / "ml_stack" / "vars" / "main.yml")["_gpufix_ml_stack_torch_wheels"]
    assert role == kb


def test_kernel_hwe_flavours_match_the_strategy() -> None:
    from gpufix.strategies import kernel_upgrade

    role = _load(ROLES / "kernel" / "vars" / "main.yml")["_gpufix_kernel_hwe_flavours"]
    assert tuple(role) == kernel_upgrade._HWE_FLAVOURS


def test_plays_of_roles_with_handlers_force_them() -> None:
    """A review (2026-12-06): a handler (update-grub, update-initramfs) notified by a file the
    role wrote never ran when a later task failed, and a re-run finds the file unchanged and
    notifies nothing; so every play that applies such a role runs its handlers on failure."""
    with_handlers = {p.parent.parent.name for p in ROLES.glob("*/handlers/main.yml")}
    checked = 0
    for book in sorted((ROLES.parent / "playbooks").glob("*.yml")):
        for play in yaml.safe_load(book.read_text()) or []:
            roles = {r["role"] if isinstance(r, dict) else r for r in play.get("roles") or []}
            if roles & with_handlers:
                checked += 1
                assert play.get("force_handlers") is True, f"{book.name}: {play.get('name')}"
    assert checked >= 3
