"""The background writer: its semantics as a pure model, a sequential
reference, and a driver that checks a real background store against them
while the test decides where the writer stands.

The model
---------
A background store is an inner store (a model ``State``) plus a FIFO queue of
batches the writer has not finished, whether the writer has already taken the
queue's head, the first failure (latched), and whether it is closed. Owner
calls and writer steps are pure functions of that state, like
``auxspec.models.sequential``:

- ``writer_take`` - the writer takes the head batch off the queue; from then on
  it no longer counts against ``max_pending_batches``.
- ``writer_step`` - the writer applies the head batch to the inner state. If the
  inner store fails, the failure is latched, and every batch behind it is
  skipped (the model drops them at once: skipping changes nothing and needs no
  inner call).
- owner calls: ``put``, ``get_concatenated``, ``read_into``, ``flush``,
  ``observe`` (``len``, ``in``, ``stats``) and ``close``.
- ``drop`` (strict only) - the owner lets go of the store without closing
  it: the writer applies what is queued, the inner store is closed once,
  after the last put, and the writer ends; no one hears of a failure. A
  scenario ends with ``close`` or ``drop`` (``ENDINGS``).

Backpressure: ``put`` cannot return while ``max_pending_batches`` batches wait
unstarted. So at most ``max_pending_batches + 1`` batches are outstanding at
once, counting the one being applied: ``max_pending_batches`` waiting plus the
one the writer took. (``upstream``: a bound below 1 means no bound, as
``queue.Queue`` does.)

Owner calls are not all deterministic. The writer runs concurrently, so a
``put`` may or may not see a failure that is *in flight*: a failure already
latched that no earlier owner call reported (the latch is a write the owner
thread may not see yet), or the failure of a batch queued before it or by it,
which the writer may apply during the call. So ``put`` returns every
``(state, outcome)`` pair it allows; a driver keeps the one that matches what
it observed. ``get_concatenated``, ``read_into``, ``flush``, ``observe`` and
``close`` first wait for every queued batch (read-your-writes), so they always
report a latched failure, and they are deterministic.

Owner outcomes are the model's ``Ok`` and ``Err`` (raised by the call itself,
with nothing queued) plus ``Latched(cause)``: the call raised
``BlockObjectStoreError`` chained (``__cause__``) to the writer's first failure,
whose kind is ``cause`` (a ``Kind`` value, or ``FAULT`` for an exception no kind
stands for, such as ``MemoryError``).

The two profiles differ only where vLLM's module does (docs/deviations.md lists each case):

| call | ``strict`` | ``upstream`` |
| --- | --- | --- |
| ``put`` with invalid input | ``Err(TYPE/PAYLOAD)`` at the call, nothing queued | undefined |
| ``put`` after a reported failure | ``Latched``, nothing queued | ``Latched`` (vLLM queues the batch; it is skipped) |
| reads, ``flush``, ``observe`` after close | ``Err(CLOSED)`` | ``Latched`` if one was latched, else ``Err(CLOSED)`` |
| ``max_pending_batches`` | int >= 1, else ``TypeError``/``ValueError`` | below 1: unbounded |

Both: an all-empty put is a no-op (even after close); ``close`` drains,
closes the inner store, and raises a latched failure once (closing again is a
no-op).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from auxspec.models import sequential as model
from auxspec.models.sequential import Err, Invalid, Item, KeyArg, Kind, Ok, State, UndefinedInput

FAULT = "fault"  # the cause of a failure that no Kind stands for (MemoryError, OSError, ...)


@dataclass(frozen=True)
class Latched:
    """The call raised ``BlockObjectStoreError`` chained to the writer's first
    failure, of kind ``cause``."""

    cause: str


BgOutcome = Ok | Err | Latched


@dataclass(frozen=True)
class Batch:
    """One put, as the writer will apply it: the owner's snapshot of its input."""

    objects: tuple[Item, ...] = ()
    retain: tuple[KeyArg, ...] = ()
    release: tuple[KeyArg, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.objects or self.retain or self.release)


@dataclass(frozen=True)
class BgState:
    """What a background store is: see the module docstring.

    ``queue`` holds the batches the writer has not finished, oldest first;
    ``started`` says the writer has taken ``queue[0]``. ``applied`` counts the
    batches handed to the inner store. ``error`` is the latched failure's
    cause; ``seen`` says an owner call has reported it, so every later put
    must. ``faults`` are the inner calls (0-based, in ``applied`` order) at
    which the inner store raises an exception of its own (fault injection);
    the inner state then does not change.
    """

    inner: State
    max_pending_batches: int | None  # None: unbounded (upstream only)
    queue: tuple[Batch, ...] = ()
    started: bool = False
    applied: int = 0
    error: str | None = None
    seen: bool = False
    closed: bool = False
    faults: frozenset[int] = frozenset()

    @property
    def profile(self) -> str:
        return self.inner.profile


Alternatives = tuple[tuple[BgState, BgOutcome], ...]


# ------------------------------------------------------------ the transition table
# h11-style: where the writer stands, as an owner call sees it, and the owner
# call, give the outcomes the call may have. The owner steps below compute
# the exact outcome; each one's contract checks it against this table, and
# docs/background.md shows it (generated by ``table_markdown``, checked by the
# tests).


class Writer(enum.Enum):
    """Where the writer stands when an owner call starts."""

    IDLE = "idle"  # nothing queued, no failure
    QUEUED = "queued"  # batches queued, every one of them will succeed
    FAILING = "failing"  # batches queued, one of them will fail
    LATCHED = "latched"  # a failure is latched that no owner call has reported
    REPORTED = "reported"  # the latched failure has been reported
    CLOSED = "closed"  # closed, with no failure
    CLOSED_FAILED = "closed, failed"  # closed after a failure (reported by close)


class OwnerCall(enum.Enum):
    """The owner calls, by what they do to the writer."""

    PUT = "put"  # a batch that is not empty and (strict) valid
    PUT_EMPTY = "put of nothing"  # no objects, retains or releases
    PUT_INVALID = "invalid put"  # strict only: a key, payload or shape the store refuses
    WAIT = "read, flush, len, in, stats"  # each waits for the queue first
    ENTER = "with (enter)"
    CLOSE = "close, with (exit)"


class Result(enum.Enum):
    """What an owner call did, by class."""

    OK = "returns"
    INNER = "the inner store's outcome"
    LATCHED = "raises the latched failure"
    CLOSED = "closed error"
    INVALID = "type or payload error, nothing queued"
    WAITS = "waits for the writer to take a batch"


_ANY_FAILURE = (Writer.FAILING, Writer.LATCHED, Writer.REPORTED)


def _transitions(profile: str) -> dict[tuple[Writer, OwnerCall], frozenset[Result]]:
    R = Result
    table: dict[tuple[Writer, OwnerCall], frozenset[Result]] = {}
    for writer in Writer:
        closed = writer in (Writer.CLOSED, Writer.CLOSED_FAILED)
        queued = writer in (Writer.QUEUED, Writer.FAILING)
        row = {
            OwnerCall.PUT_EMPTY: {R.OK},
            # A put's own batch, or one queued before it, may fail while it runs.
            OwnerCall.PUT: (
                {R.CLOSED}
                if closed
                else {R.LATCHED}
                if writer is Writer.REPORTED
                else {R.OK, R.LATCHED} | ({R.WAITS} if queued else set())
            ),
            OwnerCall.WAIT: (
                {R.LATCHED}
                if writer in _ANY_FAILURE or (writer is Writer.CLOSED_FAILED and profile == "upstream")
                else {R.CLOSED}
                if closed
                else {R.INNER}
            ),
            OwnerCall.ENTER: {R.CLOSED} if closed else {R.OK},
            OwnerCall.CLOSE: {R.LATCHED} if writer in _ANY_FAILURE else {R.OK},
        }
        if profile == "strict":
            row[OwnerCall.PUT_INVALID] = {R.CLOSED} if closed else {R.INVALID}
        table.update({(writer, call): frozenset(results) for call, results in row.items()})
    return table


TRANSITIONS: dict[str, dict[tuple[Writer, OwnerCall], frozenset[Result]]] = {
    profile: _transitions(profile) for profile in model.PROFILES
}


def writer_of(state: BgState) -> Writer:
    """Where the writer of ``state`` stands."""
    if state.closed:
        return Writer.CLOSED_FAILED if state.error is not None else Writer.CLOSED
    if state.error is not None:
        return Writer.REPORTED if state.seen else Writer.LATCHED
    if not state.queue:
        return Writer.IDLE
    return Writer.FAILING if _run_to_failure(state) is not None else Writer.QUEUED


def put_call(state: BgState, batch: Batch) -> OwnerCall:
    """Which put ``batch`` is, in the table's terms."""
    if batch.empty:
        return OwnerCall.PUT_EMPTY
    valid = model.validate_put(state.inner.object_nbytes, batch.objects, batch.retain, batch.release)
    return OwnerCall.PUT_INVALID if isinstance(valid, Kind) else OwnerCall.PUT


def result_of(call: OwnerCall, outcome: BgOutcome | None) -> Result:
    """The class of ``outcome`` (None: the call waits)."""
    if outcome is None:
        return Result.WAITS
    if isinstance(outcome, Latched):
        return Result.LATCHED
    if outcome == Err(Kind.CLOSED):
        return Result.CLOSED
    if call is OwnerCall.WAIT:
        return Result.INNER
    return Result.INVALID if isinstance(outcome, Err) else Result.OK


def allowed(state: BgState, call: OwnerCall, outcomes: Iterable[BgOutcome | None]) -> bool:
    """Whether the table allows each of ``outcomes`` for ``call`` from ``state``."""
    permitted = TRANSITIONS[state.profile][writer_of(state), call]
    return all(result_of(call, outcome) in permitted for outcome in outcomes)


def _put_allowed(state: BgState, batch: Batch, result: Alternatives) -> bool:
    outcomes: list[BgOutcome | None] = [outcome for _, outcome in result] or [None]
    return allowed(state, put_call(state, batch), outcomes)


def table_markdown(profile: str) -> str:
    """The transition table of ``profile`` as a Markdown table."""
    calls = [call for call in OwnerCall if (Writer.IDLE, call) in TRANSITIONS[profile]]
    rows = ["| writer \\ call | " + " | ".join(call.value for call in calls) + " |"]
    rows.append("| --- " * (len(calls) + 1) + "|")
    for writer in Writer:
        cells = (", ".join(r.value for r in Result if r in TRANSITIONS[profile][writer, call]) for call in calls)
        rows.append(f"| {writer.value} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


# --------------------------------------------------------------------- invariant


def background_violations(state: BgState) -> list[str]:
    """Every way ``state`` breaks the background invariant (empty when it holds)."""
    found = [f"inner: {problem}" for problem in model.violations(state.inner)]
    bound = state.max_pending_batches
    if bound is None:
        if state.profile != "upstream":
            found.append("only the upstream profile has an unbounded queue")
    elif bound < 1:
        found.append(f"max_pending_batches {bound} < 1")
    elif len(state.queue) - state.started > bound:
        found.append(f"{len(state.queue) - state.started} batches wait unstarted > max_pending_batches {bound}")
    if state.started and not state.queue:
        found.append("the writer took a batch from an empty queue")
    if state.error is not None and state.queue:
        found.append("batches are queued behind a latched failure (they must be skipped)")
    if state.seen and state.error is None:
        found.append("a failure was reported but none is latched")
    if state.closed and (state.queue or not state.inner.closed):
        found.append("a closed background store still has batches or an open inner store")
    if state.applied < 0 or any(index < 0 for index in state.faults):
        found.append("negative inner call index")
    if state.profile == "strict":
        for batch in state.queue:
            valid = model.validate_put(state.inner.object_nbytes, batch.objects, batch.retain, batch.release)
            if isinstance(valid, Kind):
                found.append("an invalid batch was queued under strict")
    return found


def check_background(state: BgState) -> bool:
    """True when ``state`` satisfies the background invariant."""
    return not background_violations(state)


# ----------------------------------------------------------------- construction


def new_background(
    inner: State | Invalid, max_pending_batches: int | Invalid, faults: Iterable[int] = ()
) -> BgState | Err:
    """The idle background store over ``inner``, or why it cannot be built:
    ``inner`` is not a store (``Invalid``: strict only, vLLM checks nothing),
    or the bound is rejected.

    pre: isinstance(inner, Invalid) or model.check(inner)
    raises: UndefinedInput
    post: isinstance(__return__, Err) or check_background(__return__)
    """
    if isinstance(inner, Invalid):
        return Err(Kind.TYPE)
    if isinstance(max_pending_batches, Invalid):
        if inner.profile == "upstream":
            raise UndefinedInput("upstream takes an int max_pending_batches only")
        return Err(Kind.TYPE)
    bound: int | None = max_pending_batches
    if max_pending_batches < 1:
        if inner.profile == "strict":
            return Err(Kind.CONFIG)
        bound = None  # queue.Queue(maxsize <= 0) is unbounded
    return BgState(inner=inner, max_pending_batches=bound, faults=frozenset(faults), closed=inner.closed)


# ----------------------------------------------------------------------- writer


def has_room(state: BgState) -> bool:
    """Whether a put can queue a batch now (fewer than the bound wait unstarted)."""
    bound = state.max_pending_batches
    return bound is None or len(state.queue) - state.started < bound


def writer_take(state: BgState) -> BgState:
    """The writer takes the head batch: it stops counting against the bound.

    pre: check_background(state) and state.queue and not state.started
    post: check_background(__return__)
    """
    return replace(state, started=True)


def writer_step(state: BgState) -> BgState:
    """The writer applies the head batch (taking it first if it has not).

    pre: check_background(state) and state.queue
    raises: UndefinedInput
    post: check_background(__return__)
    post: __return__.applied == state.applied + 1
    post: __return__.error is not None or __return__.queue == state.queue[1:]
    """
    head, rest = state.queue[0], state.queue[1:]
    inner = state.inner
    cause: str | None
    if state.applied in state.faults:
        cause = FAULT  # the inner store raised before changing anything
    else:
        inner, outcome = model.put(inner, head.objects, head.retain, head.release)
        cause = outcome.kind.value if isinstance(outcome, Err) else None
    applied = state.applied + 1
    if cause is None:
        after = replace(state, inner=inner, queue=rest, started=False, applied=applied)
        tail = _known_tail(state)
        if tail is not None:  # the rest of the queue ends where the whole of it did
            _remember(after, tail)
        return after
    # Latched: every batch behind it is skipped.
    return replace(state, inner=inner, queue=(), started=False, applied=applied, error=cause)


def drain(state: BgState) -> BgState:
    """The writer applies every queued batch, in FIFO order.

    pre: check_background(state)
    raises: UndefinedInput
    post: check_background(__return__) and not __return__.queue
    """
    tail = _known_tail(state) if state.queue else None
    if tail is not None:
        return replace(state, inner=tail, queue=(), started=False, applied=state.applied + len(state.queue))
    while state.queue:
        state = writer_step(state)
    return state


def inner_calls_to_drain(state: BgState) -> int:
    """How many batches the writer still hands to the inner store before it
    is idle (it stops at the first failure)."""
    return drain(state).applied - state.applied


def _run_to_failure(state: BgState) -> BgState | None:
    """The state in which the writer, running on, latches a failure; None if
    every queued batch succeeds."""
    while state.queue:
        state = writer_step(state)
        if state.error is not None:
            return state
    return None


# The inner state once the writer has applied a whole queue that does not
# fail, for the last few (inner, queue) pairs. A put's alternatives need the
# writer run to the end of the queue: O(queue) model steps, so a long queue
# (the depth phase's 1,100 batches held behind the writer) cost O(queue²)
# model steps. Keyed by identity, and each entry holds its inner state and
# queue, so an id is never a recycled one; only an optimisation: a miss
# runs the writer from the head, as before.
_TAILS: dict[tuple[int, int], tuple[State, tuple[Batch, ...], State]] = {}
_TAILS_KEPT = 8


def _known_tail(state: BgState) -> State | None:
    """The remembered inner state after the writer applies all of ``state``'s
    queue without a failure, if it is remembered."""
    key = id(state.inner), id(state.queue)
    cached = _TAILS.get(key)
    if cached is not None and cached[0] is state.inner and cached[1] is state.queue:
        _TAILS[key] = _TAILS.pop(key)  # the most recently used is forgotten last
        return cached[2]
    return None


def _quiet_tail(state: BgState) -> State | None:
    """The inner state after the writer applies all of ``state``'s queue, if
    no batch of it fails (no fault is due either); else None."""
    known = _known_tail(state)
    if known is not None:
        return known
    drained = drain(state)
    if drained.error is not None:
        return None
    _remember(state, drained.inner)
    return drained.inner


def _remember(state: BgState, tail: State) -> None:
    while len(_TAILS) >= _TAILS_KEPT:
        del _TAILS[next(iter(_TAILS))]
    _TAILS[id(state.inner), id(state.queue)] = (state.inner, state.queue, tail)


def _failure_after_queueing(state: BgState, batch: Batch, queued: BgState) -> BgState | None:
    """``_run_to_failure(queued)``, where ``queued`` is ``state`` (no failure
    latched) with ``batch`` queued last: when the writer runs ``state``'s
    queue through without a failure, only ``batch`` is stepped on the
    inner state it leaves."""
    tail = _quiet_tail(state)
    if tail is None:
        return _run_to_failure(queued)
    index = state.applied + len(state.queue)  # the inner call that applies ``batch``
    if index in state.faults:
        cause: str | None = FAULT
        inner = tail
    else:
        inner, outcome = model.put(tail, batch.objects, batch.retain, batch.release)
        cause = outcome.kind.value if isinstance(outcome, Err) else None
    if cause is None:
        _remember(queued, inner)
        return None
    return replace(queued, inner=inner, queue=(), started=False, applied=index + 1, error=cause)


# ------------------------------------------------------------------ owner calls


def put(state: BgState, batch: Batch) -> Alternatives:
    """Every ``(state, outcome)`` a put of ``batch`` may end in.

    Empty: the queue is full (``max_pending_batches`` batches wait unstarted),
    so the call cannot return until the writer takes a batch. Several: a
    failure is in flight; the first alternative is always the one in which the
    writer made no progress during the call.

    pre: check_background(state)
    raises: UndefinedInput
    post: all(check_background(after) for after, _ in __return__)
    post: _ok_put_queues_the_batch(state, batch, __return__)
    post: _put_allowed(state, batch, __return__)
    """
    if batch.empty:
        return ((state, Ok()),)
    if state.closed:
        return ((state, Err(Kind.CLOSED)),)
    invalid = model.validate_put(state.inner.object_nbytes, batch.objects, batch.retain, batch.release)
    if isinstance(invalid, Kind):
        if state.profile == "upstream":
            raise UndefinedInput("upstream takes str keys and exact-length bytes only")
        return ((state, Err(invalid)),)
    if state.error is not None:
        reported = (replace(state, seen=True), Latched(state.error))
        # The batch is not applied either way: it is behind the failure.
        return (reported,) if state.seen else ((state, Ok()), reported)
    if not has_room(state):
        return ()
    queued = replace(state, queue=(*state.queue, batch))
    failed = _failure_after_queueing(state, batch, queued)
    if failed is None:
        return ((queued, Ok()),)
    assert failed.error is not None
    return ((queued, Ok()), (replace(failed, seen=True), Latched(failed.error)))


def _ok_put_queues_the_batch(state: BgState, batch: Batch, result: Alternatives) -> bool:
    """A put that returns Ok with no failure latched has queued exactly its batch, last."""
    if state.error is not None or batch.empty or not result or result[0][1] != Ok():
        return True
    return result[0][0].queue == (*state.queue, batch)


def after_wait(state: BgState, read: Callable[[State], tuple[State, model.Outcome]]) -> tuple[BgState, BgOutcome]:
    """Wait for the queue, report a latched failure, else ``read`` the inner
    store: every owner call but put, enter and close.

    pre: check_background(state)
    raises: UndefinedInput
    post: check_background(__return__[0]) and not __return__[0].queue
    post: allowed(state, OwnerCall.WAIT, [__return__[1]])
    """
    if state.closed and state.profile == "strict":
        return state, Err(Kind.CLOSED)
    drained = drain(state)
    if drained.error is not None:
        return replace(drained, seen=True), Latched(drained.error)
    inner, outcome = read(drained.inner)
    return replace(drained, inner=inner), outcome


def get_concatenated(state: BgState, keys: tuple[KeyArg, ...]) -> tuple[BgState, BgOutcome]:
    """Read-your-writes: the inner read after every queued batch.

    pre: check_background(state)
    raises: UndefinedInput
    post: check_background(__return__[0]) and not __return__[0].queue
    post: allowed(state, OwnerCall.WAIT, [__return__[1]])
    """
    return after_wait(state, lambda inner: model.get_concatenated(inner, keys))


def read_into(state: BgState, keys: tuple[KeyArg, ...], buffer_nbytes: int | Invalid) -> tuple[BgState, BgOutcome]:
    """``get_concatenated`` into a caller's buffer (auxstore's extension).

    pre: check_background(state)
    pre: isinstance(buffer_nbytes, Invalid) or buffer_nbytes >= 0
    raises: UndefinedInput
    post: check_background(__return__[0]) and not __return__[0].queue
    post: allowed(state, OwnerCall.WAIT, [__return__[1]])
    """
    return after_wait(state, lambda inner: model.read_into(inner, keys, buffer_nbytes))


def _open(inner: State) -> tuple[State, model.Outcome]:
    return inner, (Err(Kind.CLOSED) if inner.closed else Ok())


def flush(state: BgState) -> tuple[BgState, BgOutcome]:
    """Wait for every queued batch; report a latched failure.

    pre: check_background(state)
    raises: UndefinedInput
    post: check_background(__return__[0]) and not __return__[0].queue
    post: allowed(state, OwnerCall.WAIT, [__return__[1]])
    """
    return after_wait(state, _open)


def enter(state: BgState) -> tuple[BgState, BgOutcome]:
    """Entering a ``with`` block: only a closed store fails. It does not wait
    for the writer, so it never reports a failure.

    pre: check_background(state)
    post: __return__[0] is state
    post: allowed(state, OwnerCall.ENTER, [__return__[1]])
    """
    return state, (Err(Kind.CLOSED) if state.closed else Ok())


def observe_inner(state: BgState) -> tuple[BgState, BgOutcome]:
    """``len``, ``in`` and ``stats``: like ``flush``; when Ok, they report the
    returned state's inner store (without changing its recency).

    pre: check_background(state)
    raises: UndefinedInput
    post: check_background(__return__[0])
    post: allowed(state, OwnerCall.WAIT, [__return__[1]])
    """
    return flush(state)


def close(state: BgState) -> tuple[BgState, BgOutcome]:
    """Drain, close the inner store, then report a latched failure, once.

    pre: check_background(state)
    raises: UndefinedInput
    post: check_background(__return__[0]) and __return__[0].closed
    post: not state.closed or __return__ == (state, Ok())
    post: allowed(state, OwnerCall.CLOSE, [__return__[1]])
    """
    if state.closed:
        return state, Ok()
    drained = drain(state)
    inner, _ = model.close(drained.inner)
    closed = replace(drained, inner=inner, closed=True)
    if drained.error is not None:
        return replace(closed, seen=True), Latched(drained.error)
    return closed, Ok()


# --------------------------------------------------------------------- endings
# How a scenario leaves the store: ``close`` (the owner's last call) or
# ``drop`` (the owner lets go of the store without closing it; strict only).

ENDINGS = ("close", "drop")


def drop(state: BgState) -> BgState:
    """The store becomes garbage without ``close`` (strict only: vLLM's
    writer keeps its store alive, so a dropped one is never collected).

    The writer applies every queued batch in order (up to a first failure,
    as ever), then the inner store is closed, once, after the last put, and
    the writer ends. No caller is left, so a failure is reported to no one.
    A store already closed is left as it is: its inner store is not closed
    again.

    pre: check_background(state)
    raises: UndefinedInput
    post: check_background(__return__) and __return__.closed
    post: not state.closed or __return__ is state
    post: __return__.applied == drain(state).applied
    """
    if state.profile != "strict":
        raise UndefinedInput("upstream does not define a dropped store (its writer keeps it alive)")
    if state.closed:
        return state
    drained = drain(state)
    inner, _ = model.close(drained.inner)
    return replace(drained, inner=inner, closed=True)
