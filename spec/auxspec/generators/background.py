"""Background scenarios: Hypothesis strategies, the fuzzer's byte decoding,
and the exhaustive writer schedules."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any, cast

from hypothesis import strategies as st

from auxspec.engine.codec import SCALED, SPECIAL_SIZES, decode
from auxspec.engine.expect import background_batch, background_step, expected_new
from auxspec.engine.ops import (
    ALL,
    PLAIN_FORMS,
    REENTRANT_FORMS,
    Close,
    Contains,
    Enter,
    Exit,
    Flush,
    Get,
    Len,
    Op,
    Put,
    ReadInto,
    Stats,
)
from auxspec.engine.table import kind_of
from auxspec.engine.traces import BackgroundVector
from auxspec.models.background import ENDINGS, BgState, OwnerCall, inner_calls_to_drain, put, writer_step
from auxspec.models.sequential import Ok

# The owner calls are the op alphabet's; Release is the driver's own step
# for the writer.


@dataclass(frozen=True)
class Release:
    """Let the writer apply up to ``batches`` more queued batches."""

    batches: int = 1


Step = Op | Release  # what a scenario runs


@dataclass(frozen=True)
class Scenario:
    """A background store's parameters, the ops to run, and the inner calls
    (0-based) at which the inner store raises the given exception.

    ``max_pending_batches`` may be a value the constructor rejects, and
    ``inner`` may be ``"none"`` (``None`` given as the inner store, strict
    only): the scenario then checks the constructor's error and runs nothing.

    ``ending``: after ``ops``, the owner closes the store (``"close"``) or
    lets go of it without closing it (``"drop"``, strict only: vLLM's writer
    keeps its store alive, so upstream defines no drop).
    """

    profile: str
    max_bytes: int
    object_nbytes: int
    max_pending_batches: Any
    ops: tuple[Step, ...]
    faults: tuple[tuple[int, Callable[[], BaseException]], ...] = ()
    inner: str = "store"
    ending: str = "close"

    def __post_init__(self) -> None:
        if self.ending not in ENDINGS:
            raise ValueError(f"ending must be one of {ENDINGS}, not {self.ending!r}")
        if self.ending == "drop" and self.profile != "strict":
            raise ValueError("a drop ending is strict only (upstream does not define a dropped store)")


def _follow(state: BgState, call: Op) -> BgState:
    """The state after ``call`` when the writer makes no progress during it
    (except the one batch a put on a full queue waits for)."""
    if kind_of(call).owner is OwnerCall.PUT:
        batch = background_batch(call)  # type: ignore[arg-type]
        alternatives = put(state, batch)
        while not alternatives:
            state = writer_step(state)
            alternatives = put(state, batch)
        return alternatives[0][0]
    return background_step(state, call)[0]


def writer_schedules(state: BgState, calls: tuple[Op, ...]) -> Iterator[tuple[Step, ...]]:
    """Every way the writer can stand at each of ``calls``: before each call
    it has applied any number of the batches it still has to apply (0 up to
    all of them), as ops with ``Release`` inserted. Depth-first, like Loom or
    Shuttle enumerate schedules, with the model telling how many batches are
    there to apply at each point."""
    if not calls:
        yield ()
        return
    for applied in range(inner_calls_to_drain(state) + 1):
        before = state
        for _ in range(applied):
            before = writer_step(before)
        prefix: tuple[Step, ...] = (Release(applied), calls[0]) if applied else (calls[0],)
        for rest in writer_schedules(_follow(before, calls[0]), calls[1:]):
            yield prefix + rest


KEYS = ("a", "b", "c", "d")
FAULT_TYPES: tuple[Callable[[], BaseException], ...] = (
    lambda: MemoryError("injected"),
    lambda: OSError(28, "injected: no space left"),
    lambda: ValueError("injected: arbitrary"),
    lambda: KeyboardInterrupt(),
)
FAULT_NAMES = ("MemoryError", "OSError", "ValueError", "KeyboardInterrupt")  # FAULT_TYPES' names, in a vector


def scenarios(
    profile: str,
    *,
    max_ops: int = 14,
    extensions: bool | None = None,
    faults: bool = True,
) -> Any:
    """A Hypothesis strategy of scenarios biased towards the writer's edge
    cases: small capacities (capacity failures), releases without retains
    (unreferenced failures), small bounds (a full queue), reads with batches
    queued, close with batches queued, injected faults. ``extensions``
    (``read_into``, ``flush``, ``len``, ``in``, ``stats``, ``with``) default
    to strict only, as vLLM has none of them; invalid input and the forms
    that change the caller's values after the call are strict only, and so
    is a third of the scenarios ending in a drop rather than a close.
    """
    strict = profile == "strict"
    use_extensions = strict if extensions is None else extensions
    # Weights by repetition: sampled_from is uniform over its list (one_of
    # would collapse repeated branches).
    key = st.sampled_from(KEYS)
    any_key: Any = st.sampled_from((*KEYS, *KEYS, *KEYS, 7)) if strict else key
    valid = [bytes([fill]) * 2 for fill in range(1, 4)]
    payload: Any = st.sampled_from([*valid * 6, None, b"\x09" * 3] if strict else valid)
    keys = st.lists(key, max_size=3).map(tuple)
    draws: dict[str, Any] = {
        "put": st.builds(
            Put,
            st.lists(st.tuples(any_key, payload), min_size=1, max_size=3).map(tuple),
            st.lists(key, max_size=2).map(tuple),
            st.lists(key, max_size=1).map(tuple),
            # tuple and iter change the caller's values after the call: strict snapshots them, vLLM does not
            st.sampled_from(PLAIN_FORMS) if strict else st.just("list"),
        ),
        "pins": st.builds(Put, st.just(()), st.lists(key, max_size=2).map(tuple), st.lists(key, max_size=2).map(tuple)),
        "release": st.builds(Release, st.integers(1, 3)),
        "get": st.builds(Get, keys),
        "read_into": st.builds(ReadInto, keys, st.integers(0, 6)),
        "other": st.sampled_from([Flush(), Len(), Contains("a"), Contains("b"), Stats(), Enter(), Exit()]),
        "close": st.just(Close()),
    }
    weights = ["put"] * 8 + ["pins"] * 2 + ["release"] * 5 + ["get"] * 2 + ["close"]
    if use_extensions:
        weights += ["read_into", "other"]
    op = st.sampled_from(weights).flatmap(draws.__getitem__)
    fault_list = (
        st.lists(st.tuples(st.integers(0, 5), st.sampled_from(FAULT_TYPES)), max_size=1, unique_by=lambda f: f[0])
        if faults
        else st.just([])
    )
    return st.builds(
        Scenario,
        st.just(profile),
        st.integers(1, 3).map(lambda capacity: 2 * capacity),
        st.just(2),
        st.integers(1, 3),
        st.lists(op, max_size=max_ops).map(tuple),
        fault_list.map(tuple),
        ending=st.sampled_from(("close", "close", "drop")) if strict else st.just("close"),
    )


# ------------------------------------------------------------ from fuzzer bytes

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
    schedule (``data[1] % 25``), ``data[2:2+n]``, one byte per owner call:
    how many queued batches the writer may apply before it (0-3); under
    ``strict``, ``data[1] // 25 % 3 == 2`` (about a third of its values)
    ends the scenario with a drop instead of a close. The owner calls are
    ``decode(data[2+n:])``, the store harness's alphabet (under ``upstream``
    without read_into, observations or Python forms: vLLM's background store
    has none of them and does not snapshot a batch).
    """
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
        faults = ((fault // 2 % 6, FAULT_TYPES[fault // 12 % len(FAULT_TYPES)]),)
    ops: list[Step] = []
    for index, op in enumerate(trace.ops[:BACKGROUND_MAX_OPS]):
        step = schedule[index] % 4 if index < len(schedule) else 0
        if step:
            ops.append(Release(step))
        ops.append(_one_pass(op))
    sizes = (trace.max_bytes, trace.object_nbytes)
    if expected_new(trace) != Ok():
        sizes = (1, 1)  # a store that cannot be built has no ops: the writer has nothing to do
    max_bytes, nbytes = sizes
    assert isinstance(max_bytes, int) and isinstance(nbytes, int)
    ending = "close"
    tail = data[1] // (BACKGROUND_MAX_OPS + 1) if len(data) > 1 else 0
    if strict and tail % 3 == 2:
        ending = "drop"
        ops += drop_tail(tail // 3 + 1, int(nbytes))
    # Plain int sizes (not yet int subclasses); keys as decoded, so str subclass
    # keys (ops.KeyStr) reach the background store, which takes them by value too.
    return Scenario(profile, int(max_bytes), int(nbytes), bound, tuple(ops), faults, inner, ending)


def drop_tail(count: int, object_nbytes: int) -> list[Step]:
    """The last ``count`` (1-3) puts of a scenario that ends in a drop, so
    the store is dropped with batches queued and the writer held at the
    gate: a key pinned, a second whose put releases that pin to zero (a
    terminal move), a third plain one. The keys are the codec's, so they meet
    the scenario's own: they evict, fail on a store full of pinned keys, and
    so on."""
    first, second, third = (Put(((key, bytes([9 - i]) * object_nbytes),)) for i, key in enumerate(TAIL_KEYS))
    tail = [replace(first, retain=(TAIL_KEYS[0],)), replace(second, release=(TAIL_KEYS[0],)), third]
    return list(tail[:count])


TAIL_KEYS = ("k0", "k1", "k2")  # of the codec's classic key pool (engine.codec)


def _one_pass(op: Op) -> Op:
    """``op`` with a generator that calls back into the store
    (``REENTRANT_FORMS``) made a plain one. The spec's background model
    defines no call from inside a call (the sequential store's rule,
    semantics.md section 12, is the inner store's), so a background port that
    takes such a call is not wrong by the spec (tests/ports/rewrites/
    r_bg_writer_loop.py is one), and the scenarios do not try it."""
    if getattr(op, "form", "list") in REENTRANT_FORMS:
        return replace(cast(Put, op), form="iter")  # put, get and read_into alike: each has a form
    return op


# ------------------------------------------------------ the scaled background scope

SCALED_BOUND = 64  # max_pending_batches up to this, log-uniform
SCALED_MAX_OPS = 200  # owner calls: enough for more than 64 batches, and bounds of 64 to fill
SCALED_FAULT_INDEX = 200  # an injected fault at any inner call up to this, log-uniform
HOLDS = ("held", "sparse", "random", "bursts")  # how the writer is let go between owner calls


def _log_scale(byte: int, most: int, least: int = 1) -> int:
    """``least`` to ``most``, log-uniform in ``byte``."""
    return max(least, round(math.exp(math.log(most) * byte / 255)) - 1 + least)


def scaled_background_scenario(data: bytes, profile: str = "strict") -> Scenario:
    """The scaled background scenario ``data`` stands for: queues from 1 to
    ``SCALED_BOUND`` batches, writer schedules that fill them, faults at any
    batch index, and the owner calls of the codec's scaled scope.

    Header bytes: ``data[0]`` the bound (log-uniform, 1 to ``SCALED_BOUND``);
    ``data[1]`` how the writer is let go (``HOLDS``: held at the gate so the
    queue fills and every later put waits on a full queue, released now and
    then, after each call, or in bursts as large as the bound) and, in its top
    bits, whether a fault is injected, and in bits 4-5 (both set, a quarter
    of the time, strict only) a drop ending instead of a close;
    ``data[2]`` the fault's inner call index
    (log-uniform, 0 to ``SCALED_FAULT_INDEX``) and type, or, a quarter of the
    time with no fault, puts without pins (a history no failure cuts short,
    so more than 64 batches are applied). The rest, its first
    byte forced into the codec's scaled scope, are the owner calls
    (``engine.codec.decode``: swarm configurations, capacities up to 96, runs
    of one op kind, close wherever its swarm bit puts it); the release before
    each call is read from those same bytes, so a shorter input is still a
    shorter scenario.
    """
    padded = data + bytes(max(0, 4 - len(data)))
    bound = _log_scale(padded[0], SCALED_BOUND)
    hold = HOLDS[padded[1] % len(HOLDS)]
    faults: tuple[tuple[int, Callable[[], BaseException]], ...] = ()
    if padded[1] >> 6 == 3:  # a quarter of the time
        index = _log_scale(padded[2], SCALED_FAULT_INDEX + 1) - 1
        faults = ((index, FAULT_TYPES[padded[1] >> 2 & 3]),)
    strict = profile == "strict"
    rest = padded[3:]
    selector = SCALED + rest[0] % (SPECIAL_SIZES - SCALED)
    trace = decode(bytes([selector]) + rest[1:], profile, ALL if strict else frozenset())
    unpinned = padded[2] % 4 == 0 and not faults  # a long history: no pins, so no failure ends it early
    ops: list[Step] = []
    for index, op in enumerate(trace.ops):
        if len(ops) >= SCALED_MAX_OPS:
            break
        op = _one_pass(op)
        if unpinned and kind_of(op).owner is OwnerCall.PUT:
            if not getattr(op, "objects", ()):
                continue  # a put of pins only, or of nothing: not a batch of this history
            op = replace(cast(Put, op), retain=(), release=())
        byte = rest[(index * 7 + 1) % len(rest)]  # a byte of the input, spread over it
        step = 0
        if hold == "sparse":
            step = 1 if byte % 8 == 0 else 0
        elif hold == "random":
            step = byte % 4
        elif hold == "bursts" and byte % 16 == 0:
            step = bound + 1
        if step:
            ops.append(Release(step))
        ops.append(op)
    sizes = (trace.max_bytes, trace.object_nbytes)
    if expected_new(trace) != Ok():
        sizes, ops = (1, 1), []
    max_bytes, nbytes = sizes
    assert isinstance(max_bytes, int) and isinstance(nbytes, int)
    ending = "close"
    if strict and padded[1] >> 4 & 3 == 3:
        ending = "drop"
        ops += drop_tail(3, int(nbytes))
    # Plain int sizes (not yet int subclasses); keys as decoded, so str subclass
    # keys (ops.KeyStr) reach the background store, which takes them by value too.
    return Scenario(profile, int(max_bytes), int(nbytes), bound, tuple(ops), faults, ending=ending)


# ------------------------------------------------------ as a vector file


def scenario_vector(scenario: Scenario, name: str, description: str = "") -> BackgroundVector:
    """``scenario`` as a background vector (``engine.traces``): the owner
    calls, the writer's releases between them and the injected faults by
    name, so a replay holds the writer where this run did."""
    faults = []
    for index, make in scenario.faults:
        known = [number for number, fault in enumerate(FAULT_TYPES) if fault is make]
        if not known:
            raise ValueError(f"a fault of no FAULT_TYPES entry cannot be written: {make!r}")
        faults.append((index, FAULT_NAMES[known[0]]))
    steps = tuple(step.batches if isinstance(step, Release) else step for step in scenario.ops)
    return BackgroundVector(
        name,
        description,
        scenario.profile,
        scenario.max_bytes,
        scenario.object_nbytes,
        scenario.max_pending_batches,
        steps,
        tuple(faults),
        scenario.inner,
        scenario.ending,
    )


def vector_scenario(vector: BackgroundVector) -> Scenario:
    """The scenario a background vector holds.

    raises: ValueError (an unknown fault or ending)"""
    faults = []
    for index, fault in vector.faults:
        if fault not in FAULT_NAMES:
            raise ValueError(f"unknown injected fault {fault!r} (known: {', '.join(FAULT_NAMES)})")
        faults.append((index, FAULT_TYPES[FAULT_NAMES.index(fault)]))
    ops = tuple(Release(step) if isinstance(step, int) else step for step in vector.steps)
    return Scenario(
        vector.profile,
        vector.max_bytes,
        vector.object_nbytes,
        vector.max_pending_batches,
        ops,
        tuple(faults),
        vector.inner,
        vector.ending,
    )
