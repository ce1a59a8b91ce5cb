"""Exit codes and the one exception type that the CLI turns into a one-line error."""

from __future__ import annotations

# Stable, documented in docs/exit-codes.md.
EXIT_OK = 0  # nothing to do / healthy / clean
EXIT_ERROR = 1  # an error (a failed play, a bug); lint and preflight: findings / a failed check
EXIT_CHANGES = 2  # changes proposed (plan) or applied (apply); differences (diff)
EXIT_INVALID = 3  # invalid input: unknown host, bad file, unknown or infeasible strategy
EXIT_UNREACHABLE = 4  # a host could not be reached or managed
EXIT_VERIFY_FAILED = 5  # applied, but the post-change probe was not healthy


class GpufixError(Exception):
    """An error a user can act on: printed as one line, mapped to an exit code."""

    exit_code = EXIT_ERROR

    def __init__(self, message: str, exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class InvalidInput(GpufixError):
    exit_code = EXIT_INVALID


class Unreachable(GpufixError):
    exit_code = EXIT_UNREACHABLE
