"""What the atheris harnesses run, kept here so that they stay a few lines and
a port author can fuzz their own store without editing them.

Each harness entry takes the fuzzer's bytes, decodes them with ``ops.decode``
(the one decoder) and raises ``DivergenceFound`` with the step view when the
target and the spec disagree.
"""

from __future__ import annotations

import contextlib
import io
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
    """The trace reader and the port protocol's request reader (``auxspec
    serve``, over the spec's store) on arbitrary text: only ``TraceError``
    may come out of the first, only status 0 or 3 out of the second."""
    from auxspec.protocol import serve
    from auxspec.reference import ReferenceStore

    text = data.decode("utf-8", errors="replace")
    with contextlib.suppress(TraceError):
        traces.loads(text, "<fuzz>")
    status = serve(lambda m, n: ReferenceStore(max_bytes=m, object_nbytes=n), io.StringIO(text), _SINK, _SINK)
    if status not in (0, 3):
        raise AssertionError(f"auxspec serve ended with status {status}")


class _Sink(io.StringIO):
    """Where the protocol harness's answers and complaints go: nowhere."""

    def write(self, text: str) -> int:
        return len(text)


_SINK = _Sink()


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


# ------------------------------------------------------------------ model harness


class ModelContractBroken(AssertionError):
    """A model step broke its own contract on the fuzzer's input."""


def model_contracts(data: bytes) -> None:
    """The model harness body: the model's PEP 316 contracts, checked on every
    step of ``decode(data[1:])`` (CrossHair's job, by fuzzing, on traces of
    any length). ``data[0]`` picks the profile; invalid values come under
    both, and under ``upstream`` the step must raise ``UndefinedInput``,
    which ends the trace."""
    from auxspec import model
    from auxspec.binding import as_size
    from auxspec.contracts import Checked, ContractViolation
    from auxspec.ops import UNDEFINED, spec_step

    profile = "upstream" if data and data[0] & 1 else "strict"
    trace = decode(data[1:], profile, ALL | {UNDEFINED})
    steps = Checked(model)
    try:
        state = steps.new(as_size(trace.max_bytes), as_size(trace.object_nbytes), profile)
        if isinstance(state, model.Err):
            return
        for op in trace.ops:
            state = spec_step(state, op, steps)[0]
    except model.UndefinedInput:
        if profile != "upstream":
            raise ModelContractBroken(f"strict raised UndefinedInput on {trace}") from None
    except ContractViolation as broken:
        raise ModelContractBroken(f"{broken}\nin {trace}") from broken


# ------------------------------------------------------------- invariants harness


class ToothlessCheck(AssertionError):
    """An invariant check passed a state the fuzzer had broken."""


def invariant_teeth(data: bytes) -> None:
    """The invariants harness body: run ``decode(data[1:])`` on auxstore's
    store and the model, break each (corruption ``data[0]``), and require
    ``check_invariants()`` and ``model.violations`` to notice."""
    import auxstore
    from auxspec import corruptions, model
    from auxspec.ops import apply, construct, spec_step

    which = data[0] if data else 0
    trace = decode(data[1:], "strict")
    store, _ = construct(lambda m, n: auxstore.BlockObjectStore(max_bytes=m, object_nbytes=n), trace)
    if store is None:
        return
    state = model.new(trace.max_bytes, trace.object_nbytes, "strict")  # type: ignore[arg-type]
    assert isinstance(state, model.State)
    for op in trace.ops:
        apply(store, op)  # the store harness compares the outcomes; here only the state matters
        state = spec_step(state, op)[0]
    store.check_invariants()  # intact before it is broken
    broken = corruptions.corrupt_store(store, which)
    try:
        store.check_invariants()
    except auxstore.InvariantError:
        pass
    else:
        raise ToothlessCheck(f"check_invariants() passed a store with {broken}, after {trace}")
    name, corrupt, words = corruptions.MODEL[which % len(corruptions.MODEL)]
    found = model.violations(corrupt(state))
    if not any(words in problem for problem in found):
        raise ToothlessCheck(f"violations() found {found} in a state with {name} (wanted {words!r}), after {trace}")


# ------------------------------------------------------------------ dictionaries


def _op_bytes(op: Op, profile: str = "strict") -> bytes:
    """What ``decode`` reads as ``op`` (keys named k0.. in order of use)."""
    data = encode(Trace(profile, 4, 2, (op,)))
    assert data is not None, op
    return data[3:]  # after the sizes


def dictionary(harness: str) -> list[tuple[str, bytes]]:
    """libFuzzer dictionary entries for ``harness``: byte strings ``decode``
    reads as whole ops, store sizes and (per harness) the leading byte, made
    with ``encode`` so they cannot drift from the decoder."""
    upstream = harness == "upstream"
    profile = "upstream" if upstream else "strict"
    k0, k1 = "k0", "k1"
    ops: list[tuple[str, Op]] = [
        ("put_k0", Put(((k0, b"AA"),))),
        ("put_k0_k0_dedup", Put(((k0, b"AA"), (k0, b"BB")))),
        ("put_k0_retain_k0", Put(((k0, b"AA"),), (k0,))),
        ("retain_k0", Put((), (k0,))),
        ("release_k0", Put((), (), (k0,))),
        ("retain_release_k0", Put((), (k0,), (k0,))),
        ("release_k0_twice", Put((), (), (k0, k0))),
        ("put_k0_k1_retain_k1", Put(((k0, b"AA"), (k1, b"BB")), (k1,))),
        ("get_k0", Get((k0,))),
        ("get_k0_k0", Get((k0, k0))),
        ("get_none", Get(())),
        ("put_tuple_form", Put(((k0, b"AA"),), form="tuple")),
        ("get_tuple_form", Get((k0,), form="tuple")),
    ]
    if not upstream:
        ops += [
            ("close", Close()),
            ("put_iter_form", Put(((k0, b"AA"),), (k0,), form="iter")),
            ("get_iter_form", Get((k0,), form="iter")),
            ("read_into_k0", ReadInto((k0,), 2)),
            ("read_into_k0_short", ReadInto((k0,), 1)),
            ("read_into_read_only", ReadInto((k0,), 2, readonly=True)),
            ("read_into_strided", ReadInto((k0,), Bad("strided"))),
            ("read_into_not_a_buffer", ReadInto((k0,), Bad("not-buffer"))),
            ("flush", Flush()),
            ("len", Len()),
            ("contains_k0", Contains(k0)),
            ("stats", Stats()),
            ("enter", Enter()),
            ("exit", Exit()),
            ("put_key_not_str", Put(((1, b"AA"),))),
            ("put_payload_wrong_length", Put(((k0, b"AAA"),))),
            ("put_payload_not_bytes", Put(((k0, None),))),
            ("put_object_without_key", Put((Bad("object"),))),
            ("put_batch_is_a_str", Put(Bad("str"))),
            ("retain_is_an_int", Put((), Bad("int"))),
            ("get_keys_is_a_str", Get(Bad("str"))),
        ]
    entries = [(name, _op_bytes(op, profile)) for name, op in ops]
    sizes = [
        ("sizes_capacity1_nbytes1", bytes([0, 0, 0])),
        ("sizes_capacity4_nbytes2", bytes([1, 6, 1])),
        ("sizes_big_objects", bytes([SPECIAL_SIZES, 2, 0])),
        ("sizes_out_of_range", bytes([SPECIAL_SIZES + 8])),
    ]
    if not upstream:
        sizes.append(("sizes_not_ints", bytes([SPECIAL_SIZES + 8 + len(BAD_SIZES)])))
    entries += sizes
    if harness == "background":
        entries += [
            ("config_bound1", b"\x00"),
            ("config_bound1_memory_error_at_call0", b"\x03"),
            ("config_bound_zero", bytes([BACKGROUND_CONSTRUCTORS])),
            ("config_inner_none", b"\xff"),
            ("schedule_release1", b"\x01"),
            ("schedule_release3", b"\x03"),
        ]
    elif harness == "model":
        entries += [("profile_strict", b"\x00"), ("profile_upstream", b"\x01")]
    elif harness == "invariants":
        entries += [(f"corruption_{i}", bytes([i])) for i in range(10)]
    return entries


def _escaped(data: bytes) -> str:
    return "".join(f"\\x{byte:02x}" for byte in data)


def dictionary_text(harness: str) -> str:
    """``dictionary(harness)`` in libFuzzer's dictionary format."""
    rows = [
        "# libFuzzer dictionary, written by fuzz/corpus/make_seeds.py --dictionaries from",
        f"# auxspec.fuzzing.dictionary({harness!r}): what the op alphabet's decoder reads",
        "# as whole ops, sizes and leading bytes. Do not edit; regenerate.",
    ]
    rows += [f'{name}="{_escaped(data)}"' for name, data in dictionary(harness)]
    return "\n".join(rows) + "\n"
