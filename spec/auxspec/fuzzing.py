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
from auxspec.model import Ok
from auxspec.ops import (
    ALL,
    BAD_BUFFERS,
    BAD_LISTS,
    BAD_SIZES,
    BIG,
    KEY_POOL,
    MAX_OPS,
    NON_INT_SIZES,
    SPECIAL_SIZES,
    Bad,
    Close,
    Contains,
    Enter,
    Exit,
    Flush,
    Get,
    KeyList,
    KeyValue,
    Len,
    Op,
    PayloadValue,
    Put,
    ReadInto,
    SizeValue,
    Stats,
    Trace,
    TraceError,
    decode,
    expected_new,
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

    features = target.features

    def one_input(data: bytes) -> None:
        divergence = compare(decode(data, profile, features), target)
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
    """Bytes that ``decode`` (with every feature) turns into ``trace`` up to
    renaming: keys become the pool's ``k0``..``k5`` in order of first use,
    any int key becomes ``1``, a payload becomes its first byte repeated.
    None when ``trace`` is outside the alphabet (sizes other than what
    ``decode`` builds, more than six keys, more than ``MAX_OPS`` ops, or a
    list longer than ``decode`` reads).

    The inverse of the decoder, not a second one: seeds for the store harness
    are made from the conformance vectors with it, and ``decode(encode(t))``
    is checked by the tests.
    """
    strict = trace.profile == "strict"
    try:
        out = bytearray(_encode_sizes(trace, strict))
        if out[0] >= SPECIAL_SIZES + 8:
            return bytes(out) if not trace.ops else None
        nbytes = trace.object_nbytes
        assert isinstance(nbytes, int)
        names: dict[str, int] = {}
        for op in trace.ops:
            _encode_op(op, out, names, nbytes, strict)
    except _Unencodable:
        return None
    return bytes(out)


class _Unencodable(Exception):
    pass


def _want(cond: bool) -> None:
    if not cond:
        raise _Unencodable


def _same(a: SizeValue, b: SizeValue) -> bool:
    return type(a) is type(b) and a == b  # True is not 1 here


def _encode_sizes(trace: Trace, strict: bool) -> bytes:
    sizes = (trace.max_bytes, trace.object_nbytes)
    table = BAD_SIZES + NON_INT_SIZES if strict else BAD_SIZES
    for index, (max_bytes, nbytes) in enumerate(table):
        if _same(max_bytes, sizes[0]) and _same(nbytes, sizes[1]):
            return bytes([SPECIAL_SIZES + 8 + index])
    _want(all(type(size) is int for size in sizes))
    max_bytes, nbytes = int(trace.max_bytes), int(trace.object_nbytes)  # type: ignore[arg-type]
    _want((1 <= nbytes <= 4 or nbytes == BIG) and 1 <= max_bytes // nbytes <= 4 and len(trace.ops) <= MAX_OPS)
    capacity, remainder = divmod(max_bytes, nbytes)
    _want(remainder < min(nbytes, 4))
    return bytes([SPECIAL_SIZES if nbytes == BIG else nbytes - 1, 2 * (capacity - 1), remainder])


_OP_BYTES = {"put": 0, "get": 17, "read_into": 24, "observe": 29, "close": 31}
_FORM_BITS = {"list": 0, "tuple": 6 << 5, "iter": 7 << 5}
_OBSERVATION_BYTES = {Flush: 0, Len: 1, Contains: 2, Stats: 3, Enter: 4, Exit: 5}


def _encode_op(op: Op, out: bytearray, names: dict[str, int], nbytes: int, strict: bool) -> None:
    def key(value: KeyValue) -> None:
        if not isinstance(value, str):
            _want(strict)
            out.append(255)
            return
        if value not in names:
            _want(len(names) < KEY_POOL)
            names[value] = len(names)
        out.append(names[value])

    def keys(values: KeyList, most: int) -> None:
        if isinstance(values, Bad):
            _want(strict)
            out.append(250 + BAD_LISTS.index(values.what))
            return
        _want(len(values) <= most)
        out.append(len(values))
        for value in values:
            key(value)

    if isinstance(op, (Put, Get, ReadInto)):
        _want(strict or isinstance(op, Put) or op.form != "iter")
        out.append(_OP_BYTES[op.name] | _FORM_BITS[op.form])
    if isinstance(op, Put):
        if isinstance(op.objects, Bad):
            _want(strict)
            out.append(250 + BAD_LISTS.index(op.objects.what))
        else:
            _want(len(op.objects) <= 3)
            out.append(len(op.objects))
            for obj in op.objects:
                if isinstance(obj, Bad):
                    _want(strict)
                    out.append(254)
                    continue
                key(obj[0])
                out.append(_fill(obj[1], nbytes, strict))
        keys(op.retain, 2)
        keys(op.release, 2)
    elif isinstance(op, Get):
        keys(op.keys, 4)
    elif isinstance(op, ReadInto):
        keys(op.keys, 3)
        exact = (1 if isinstance(op.keys, Bad) else len(op.keys)) * nbytes
        if isinstance(op.buffer, Bad):
            _want(strict and not op.readonly)
            out.extend((1, 1 + BAD_BUFFERS.index(op.buffer.what)))
        else:
            _want(op.buffer in (exact, max(exact - 1, 0)) and (strict or not op.readonly))
            out.append(1 if op.buffer == exact and exact else 0)
            out.append(0 if op.readonly else 3)
    elif isinstance(op, Close):
        out.append(_OP_BYTES["close"])
    else:
        out.extend((_OP_BYTES["observe"], _OBSERVATION_BYTES[type(op)]))
        if isinstance(op, Contains):
            key(op.key)


def _fill(payload: PayloadValue, nbytes: int, strict: bool) -> int:
    if payload is None:
        _want(strict)
        return 253
    if len(payload) != nbytes:
        _want(strict and len(payload) == nbytes + 1)
        return 254
    first = payload[0]
    return first ^ 0x80 if strict and first in (253, 254) else first  # keep it a valid payload


# ------------------------------------------------------------- background harness

BACKGROUND_MAX_OPS = 24  # each owner call that waits costs the driver's delay


# Config bytes from here on build stores the constructor rejects (strict) or,
# under upstream, vLLM's unbounded queue (a bound below 1).
BACKGROUND_CONSTRUCTORS = 250
_BAD_BOUNDS: tuple[object, ...] = (0, -1, True, 1.5, "2")


def background_scenario(data: bytes, profile: str = "strict") -> Scenario:
    """The background scenario ``data`` stands for.

    ``data[0]`` picks ``max_pending_batches`` (1-3) and an optional injected
    fault, or (from ``BACKGROUND_CONSTRUCTORS`` on) a bound the constructor
    rejects or a ``None`` inner store; ``data[1]`` is the length ``n`` of a
    schedule, ``data[2:2+n]``, one byte per owner call: how many queued
    batches the writer may apply before it (0-3). The owner calls are
    ``decode(data[2+n:])``, the store harness's alphabet (under ``upstream``
    without read_into, observations or Python forms: vLLM's background store
    has none of them and does not snapshot a batch).
    """
    from auxspec import background as bg

    config = data[0] if data else 0
    length = (data[1] if len(data) > 1 else 0) % (BACKGROUND_MAX_OPS + 1)
    schedule = data[2 : 2 + length]
    strict = profile == "strict"
    trace = decode(data[2 + length :], profile, ALL if strict else frozenset())
    bound: object = 1 + config % 3
    inner = "store"
    if config >= BACKGROUND_CONSTRUCTORS:
        if config == 255 and strict:
            inner = "none"
        elif strict or config - BACKGROUND_CONSTRUCTORS < 2:
            bound = _BAD_BOUNDS[config - BACKGROUND_CONSTRUCTORS]
    fault = config // 3
    faults: tuple[tuple[int, Callable[[], BaseException]], ...] = ()
    if fault % 2 and config < BACKGROUND_CONSTRUCTORS:
        faults = ((fault // 2 % 6, bg.FAULT_TYPES[fault // 12 % len(bg.FAULT_TYPES)]),)
    ops: list[bg.Op] = []
    for index, op in enumerate(trace.ops[:BACKGROUND_MAX_OPS]):
        step = schedule[index] % 4 if index < len(schedule) else 0
        if step:
            ops.append(bg.Release(step))
        ops.append(op)
    sizes = (trace.max_bytes, trace.object_nbytes)
    if expected_new(trace) != Ok():
        sizes = (1, 1)  # a store that cannot be built has no ops: the writer has nothing to do
    max_bytes, nbytes = sizes
    assert isinstance(max_bytes, int) and isinstance(nbytes, int)
    return bg.Scenario(profile, max_bytes, nbytes, bound, tuple(ops), faults, inner)


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
