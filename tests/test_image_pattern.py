"""`--image`: the controller (plan time) and the container_runtime role (apply time, and a
playbook of the operator's own) take the same references."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from gpufix.apply.varspec import PATTERNS

ROOT = Path(__file__).resolve().parents[1]
DIGEST = "sha256:" + "0123456789abcdef" * 4
ROLE = yaml.safe_load((ROOT / "roles/container_runtime/vars/main.yml").read_text())[
    "_gpufix_container_runtime_image_pattern"
]


@pytest.mark.parametrize(
    ("ref", "taken"),
    [
        (f"nvcr.io/nvidia/pytorch:24.04-py3@{DIGEST}", True),
        (f"registry.example.com:5000/team/train@{DIGEST}", True),
        (f"pytorch/pytorch@{DIGEST}", True),
        ("pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime", False),  # a tag moves
        (f"-v/:/host@{DIGEST}", False),  # an option to docker
        (f"pytorch/pytorch -v /:/h@{DIGEST}", False),
        (f"pytorch/pytorch@{DIGEST}\n", False),  # `$` also matches before a final newline
        ("pytorch/pytorch@sha256:" + "0" * 63, False),
        ("pytorch/pytorch@sha256:" + "A" * 64, False),
        (f"Pytorch/Pytorch@{DIGEST}", False),  # Docker: repository names are lowercase
        ("p" * 300 + f"@{DIGEST}", False),
    ],
)
def test_controller_and_role_take_the_same_references(ref: str, taken: bool) -> None:
    # Ansible's `match` test is re.match; the controller's check is fullmatch
    assert bool(re.match(ROLE, ref)) is taken
    assert bool(re.fullmatch(PATTERNS["image_digest"], ref)) is taken
