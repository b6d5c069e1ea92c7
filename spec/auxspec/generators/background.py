"""Background scenarios: Hypothesis strategies, the fuzzer's byte decoding,
and the exhaustive writer schedules."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from auxspec.engine.codec import decode
from auxspec.engine.expect import background_batch, background_step, expected_new
from auxspec.engine.ops import ALL, FORMS, Close, Contains, Enter, Exit, Flush, Get, Len, Op, Put, ReadInto, Stats
from auxspec.engine.table import kind_of
from auxspec.models.background import BgState, OwnerCall, inner_calls_to_drain, put, writer_step
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
    """

    profile: str
    max_bytes: int
    object_nbytes: int
    max_pending_batches: Any
    ops: tuple[Step, ...]
    faults: tuple[tuple[int, Callable[[], BaseException]], ...] = ()
    inner: str = "store"


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
    that change the caller's values after the call are strict only.
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
            st.sampled_from(FORMS) if strict else st.just("list"),
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
    schedule, ``data[2:2+n]``, one byte per owner call: how many queued
    batches the writer may apply before it (0-3). The owner calls are
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
        ops.append(op)
    sizes = (trace.max_bytes, trace.object_nbytes)
    if expected_new(trace) != Ok():
        sizes = (1, 1)  # a store that cannot be built has no ops: the writer has nothing to do
    max_bytes, nbytes = sizes
    assert isinstance(max_bytes, int) and isinstance(nbytes, int)
    return Scenario(profile, max_bytes, nbytes, bound, tuple(ops), faults, inner)


