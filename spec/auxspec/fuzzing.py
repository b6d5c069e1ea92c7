"""What the atheris harnesses run, kept here so that they stay a few lines and
a port author can fuzz their own store without editing them.

Each harness entry takes the fuzzer's bytes, decodes them with ``ops.decode``
(the one decoder) and raises ``DivergenceFound`` with the step view when the
target and the spec disagree.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable

from auxspec import traces
from auxspec.ops import TraceError, decode
from auxspec.verify import Target, compare, load_target

TARGET_ENV = "AUXSPEC_TARGET"  # module:Class or a .py path; unset: the bundled store
PROFILE_ENV = "AUXSPEC_PROFILE"


class DivergenceFound(AssertionError):
    """The target and the spec disagree on the fuzzer's input."""


def target_from_env(default: str | None = None) -> Target:
    return load_target(os.environ.get(TARGET_ENV, default))


def differential(target: Target, profile: str) -> Callable[[bytes], None]:
    """The harness body: spec vs ``target`` under ``profile``."""

    def one_input(data: bytes) -> None:
        divergence = compare(decode(data, profile), target)
        if divergence is not None:
            raise DivergenceFound(f"{target.label} ({profile}):\n{divergence.render()}")

    return one_input


def trace_parser(data: bytes) -> None:
    """The trace reader on arbitrary text: only ``TraceError`` may come out."""
    text = data.decode("utf-8", errors="replace")
    with contextlib.suppress(TraceError):
        traces.loads(text, "<fuzz>")


def profile_from_env(default: str) -> str:
    return os.environ.get(PROFILE_ENV, default)
