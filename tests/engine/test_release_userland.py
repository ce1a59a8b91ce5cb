"""A snapshot that leaves glibc and the Python out but names the release: the release ships one
glibc and packages a few interpreters (ubuntu.yaml), so a stack move fits them rather than
going unchecked (a review, 2026-12-07, Lightning#5651 written for Ubuntu 18.04: the plan moved
to torch 2.15 with glibc 2.27 and said only "glibc is not in the facts")."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from gpufix.engine.kb import load
from gpufix.engine.stack_choice import basis
from gpufix.facts.host import from_facts

KB = load()
HOSTS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"
UNKNOWN = {"unknown": "not in the report"}


def unread(os_: dict[str, Any]) -> dict[str, Any]:
    f: dict[str, Any] = copy.deepcopy(
        json.loads((HOSTS / "bionic-ga-2x3090.json").read_text())["facts"]
    )
    f["glibc"], f["pythons"], f["python_envs"], f["os"] = UNKNOWN, [], [], os_
    return f


def test_bionic_by_codename_gives_its_glibc_and_pythons() -> None:
    b = basis(from_facts(unread({"id": "ubuntu", "codename": "bionic"})), KB)
    assert b.glibc == "2.27" and b.pythons == ("3.8", "3.7", "3.6")
    assert any("2.27, the one ubuntu 18.04 ships, is assumed" in a for a in b.assumed)


def test_ubuntu_by_version_id_alone() -> None:
    b = basis(from_facts(unread({"id": "ubuntu", "version_id": "22.04"})), KB)
    assert b.glibc == "2.35"


def test_a_derivative_by_its_ubuntu_codename() -> None:
    mint = {"id": "linuxmint", "id_like": ["ubuntu", "debian"], "codename": "jammy",
            "version_id": "21.3"}  # fmt: skip
    assert basis(from_facts(unread(mint)), KB).glibc == "2.35"


def test_another_os_or_an_unknown_release_assumes_nothing() -> None:
    rhel = {"id": "rhel", "id_like": ["fedora"], "version_id": "18.04", "codename": "Ootpa"}
    for os_ in (
        rhel,
        {"id": "ubuntu", "version_id": "99.04"},
        {"id": "linuxmint", "version_id": "22.04"},
    ):
        b = basis(from_facts(unread(os_)), KB)
        assert b.glibc is None and b.pythons == ()
        assert "glibc is not in the facts: the wheel's glibc floor is not checked" in b.assumed


def test_a_read_glibc_wins() -> None:
    f = unread({"id": "ubuntu", "codename": "bionic"})
    f["glibc"] = "2.28"
    assert basis(from_facts(f), KB).glibc == "2.28"
