"""`gpufix lint PATH...`: the click command and the function it calls."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import replace
from typing import TextIO

import click

from gpufix.errors import EXIT_INVALID, EXIT_OK, GpufixError, InvalidInput
from gpufix.inputs import one_line

from .api import lint_paths
from .config import CONTEXTS, load_config, parse_target, source_root
from .formatters import FORMATS, format_text, summary, to_json, to_sarif


def main_lint(
    paths: Sequence[str],
    fmt: str = "text",
    out: TextIO | None = None,
    err: TextIO | None = None,
    target_version: str | None = None,
    config_file: str | None = None,
    all_contexts: bool = False,
    exit_zero: bool = False,
) -> int:
    """0 clean (or notes only), 1 errors or warnings (0 with exit_zero), 3 bad input."""
    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    try:
        if fmt not in FORMATS:
            raise InvalidInput(f"unknown output format {fmt!r}; use one of {', '.join(FORMATS)}")
        given = list(paths) or ["."]
        override = parse_target(target_version) if target_version is not None else None
        config = load_config(given, config_file, override)
        if all_contexts:
            config = replace(config, contexts=dict.fromkeys(CONTEXTS, "as-is"))
        result = lint_paths(given, config)
    except GpufixError as e:
        print(f"gpufix lint: error: {one_line(str(e), 4000)}", file=err)
        return e.exit_code if e.exit_code else EXIT_INVALID
    if fmt == "json":
        out.write(json.dumps(to_json(result), indent=2) + "\n")
    elif fmt == "sarif":
        out.write(json.dumps(to_sarif(result, source_root(given, config)), indent=2) + "\n")
    else:
        out.write(format_text(result))
    if fmt == "text" or result.skipped:  # a file not checked is said in every format
        print(summary(result), file=err)
    return EXIT_OK if exit_zero else result.exit_code


@click.command("lint")
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--json", "fmt", flag_value="json", help="Findings as JSON on stdout.")
@click.option(
    "--sarif", "fmt", flag_value="sarif", help="Findings as SARIF 2.1.0 (for CI annotations)."
)
@click.option(
    "--target-version",
    metavar="PY",
    help="Python the code is written for (py311, 3.11); default: pyproject's requires-python.",
)
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False),
    help="A pyproject.toml to read [tool.gpufix.lint] from (default: the nearest one).",
)
@click.option(
    "--all-contexts",
    is_flag=True,
    help="Report in tests, examples and installed/vendored code at the rules' own levels.",
)
@click.option(
    "--exit-zero",
    is_flag=True,
    help="Exit 0 even with findings (to upload SARIF); bad input is still 3, a crash 1.",
)
def lint(
    paths: tuple[str, ...],
    fmt: str | None,
    target_version: str | None,
    config_file: str | None,
    all_contexts: bool,
    exit_zero: bool,
) -> None:
    """Find CUDA_VISIBLE_DEVICES set after torch is imported, and other start-up mistakes.

    Exit 0: clean (notes allowed); 1: errors or warnings; 3: bad input (see docs/lint.md).
    """
    sys.exit(
        main_lint(
            paths,
            fmt or "text",
            target_version=target_version,
            config_file=config_file,
            all_contexts=all_contexts,
            exit_zero=exit_zero,
        )
    )
