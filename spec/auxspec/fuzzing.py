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
from typing import TYPE_CHECKING

from auxspec import traces
from auxspec.ops import (
    KEY_POOL,
    MAX_OPS,
    Get,
    KeyValue,
    PayloadValue,
    Put,
    ReadInto,
    Trace,
    TraceError,
    decode,
)
from auxspec.verify import Target, compare, load_target

if TYPE_CHECKING:
    from auxspec.background import Scenario

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


# ------------------------------------------------------------------ corpus seeds
# Appended for the seed corpora and the background harness (docs/fuzzing.md).


def encode(trace: Trace) -> bytes | None:
    """Bytes that ``decode`` turns into ``trace`` up to renaming: keys become
    the pool's ``k0``..``k5`` in order of first use, any int key becomes ``1``,
    a payload becomes its first byte repeated. None when ``trace`` is outside
    the alphabet (sizes other than what ``decode`` builds, more than six keys,
    more than ``MAX_OPS`` ops, or a list longer than ``decode`` reads).

    The inverse of the decoder, not a second one: seeds for the store harness
    are made from the conformance vectors with it, and ``decode(encode(t))``
    is checked by the tests.
    """
    sizes = (trace.max_bytes, trace.object_nbytes)
    if not all(isinstance(size, int) and not isinstance(size, bool) for size in sizes):
        return None
    max_bytes, nbytes = int(trace.max_bytes), int(trace.object_nbytes)  # type: ignore[arg-type]
    if not 1 <= nbytes <= 4 or not 1 <= max_bytes // nbytes <= 4 or len(trace.ops) > MAX_OPS:
        return None
    strict = trace.profile == "strict"
    names: dict[str, int] = {}
    out = bytearray([nbytes - 1, 2 * (max_bytes // nbytes - 1), max_bytes % nbytes])

    def key(value: KeyValue) -> int:
        if not isinstance(value, str):
            if not strict:
                raise _Unencodable
            return 255
        if value not in names:
            if len(names) == KEY_POOL:
                raise _Unencodable
            names[value] = len(names)
        return names[value]

    def keys(values: tuple[KeyValue, ...], most: int) -> None:
        if len(values) > most:
            raise _Unencodable
        out.append(len(values))
        out.extend(key(value) for value in values)

    try:
        for op in trace.ops:
            if isinstance(op, Put):
                if len(op.objects) > 3:
                    raise _Unencodable
                out.extend((0, len(op.objects)))
                for name, payload in op.objects:
                    out.append(key(name))
                    out.append(_fill(payload, nbytes, strict))
                keys(op.retain, 2)
                keys(op.release, 2)
            elif isinstance(op, Get):
                out.append(18)
                keys(op.keys, 4)
            elif isinstance(op, ReadInto):
                if not strict:
                    raise _Unencodable
                out.append(25)
                keys(op.keys, 3)
                exact = len(op.keys) * nbytes
                if op.buffer not in (exact, max(exact - 1, 0)):
                    raise _Unencodable
                out.append(1 if op.buffer == exact and exact else 0)
                out.append(0 if op.readonly else 1)
            else:
                if not strict:
                    raise _Unencodable  # decode gives upstream no close
                out.append(31)
    except _Unencodable:
        return None
    return bytes(out)


class _Unencodable(Exception):
    pass


def _fill(payload: PayloadValue, nbytes: int, strict: bool) -> int:
    if payload is None:
        if not strict:
            raise _Unencodable
        return 253
    if len(payload) != nbytes:
        if not strict:
            raise _Unencodable
        return 254
    first = payload[0]
    return first ^ 0x80 if strict and first in (253, 254) else first  # keep it a valid payload


# ------------------------------------------------------------- background harness

BACKGROUND_MAX_OPS = 24  # each owner call that waits costs the driver's delay


def background_scenario(data: bytes, profile: str = "strict") -> Scenario:
    """The background scenario ``data`` stands for.

    ``data[0]`` picks ``max_pending_batches`` (1-3) and an optional injected
    fault; ``data[1]`` is the length ``n`` of a schedule, ``data[2:2+n]``, one
    byte per owner call (how many batches the writer may apply before it, an
    observation call after it, whether a put then scribbles over its
    caller's buffers); the owner calls are ``decode(data[2+n:])``, the same
    alphabet as the store harness.
    """
    from auxspec import background as bg

    config = data[0] if data else 0
    length = (data[1] if len(data) > 1 else 0) % (BACKGROUND_MAX_OPS + 1)
    schedule = data[2 : 2 + length]
    trace = decode(data[2 + length :], profile)
    strict = profile == "strict"
    fault = config // 3
    faults: tuple[tuple[int, Callable[[], BaseException]], ...] = ()
    if fault % 2:
        faults = ((fault // 2 % 6, bg.FAULT_TYPES[fault // 12 % len(bg.FAULT_TYPES)]),)
    observations: tuple[bg.Op | None, ...] = (None, None, None, None, bg.Flush(), bg.Len(), bg.Contains("k0"))
    ops: list[bg.Op] = []
    for index, op in enumerate(trace.ops[:BACKGROUND_MAX_OPS]):
        step = schedule[index] if index < len(schedule) else 0
        if step % 4:
            ops.append(bg.Release(step % 4))
        if isinstance(op, Put):
            ops.append(bg.Put(op.objects, op.retain, op.release, mutate=strict and bool(step & 0x20)))
        elif isinstance(op, Get):
            ops.append(bg.Get(op.keys))
        elif isinstance(op, ReadInto):
            ops.append(bg.ReadInto(op.keys, op.buffer))
        else:
            ops.append(bg.Close())
        observation = observations[step // 4 % 8] if step // 4 % 8 < len(observations) else bg.Contains("k1")
        if observation is not None and strict:  # vLLM's background store has no flush, len or in
            ops.append(observation)
    assert isinstance(trace.max_bytes, int) and isinstance(trace.object_nbytes, int)
    return bg.Scenario(profile, trace.max_bytes, trace.object_nbytes, 1 + config % 3, tuple(ops), faults)


def background_harness(profile: str = "strict") -> Callable[[bytes], None]:
    """The background harness body: auxstore's background store (vLLM's under
    ``upstream``) driven through ``background_scenario(data)`` with the writer
    held at a gate; a ``Violation`` (an AssertionError) is the finding."""
    from auxspec import background as bg

    target = bg.auxstore_target() if profile == "strict" else bg.upstream_target()
    if target is None:
        raise LookupError("vLLM's module is not available for the upstream background harness")
    chosen = target

    def one_input(data: bytes) -> None:
        bg.run_scenario(chosen, background_scenario(data, profile))

    return one_input
