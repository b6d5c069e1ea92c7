"""The background writer: its semantics as a pure model, a sequential
reference, and a driver that checks a real background store against them
while the test decides where the writer stands.

The model
---------
A background store is an inner store (a model ``State``) plus a FIFO queue of
batches the writer has not finished, whether the writer has already taken the
queue's head, the first failure (latched), and whether it is closed. Owner
calls and writer steps are pure functions of that state, like
``auxspec.model``:

- ``writer_take`` - the writer takes the head batch off the queue; from then on
  it no longer counts against ``max_pending_batches``.
- ``writer_step`` - the writer applies the head batch to the inner state. If the
  inner store fails, the failure is latched, and every batch behind it is
  skipped (the model drops them at once: skipping changes nothing and needs no
  inner call).
- owner calls: ``put``, ``get_concatenated``, ``read_into``, ``flush``,
  ``observe`` (``len``, ``in``, ``stats``) and ``close``.

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

The two profiles differ only where vLLM's module does (see DESIGN.md):

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

import contextlib
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from types import TracebackType
from typing import Any

from auxspec import binding, model, ops
from auxspec.model import Err, Invalid, Item, KeyArg, Kind, Ok, State, UndefinedInput
from auxspec.reference import ReferenceStore, observe
from auxstore import BlockObjectStoreError, StoreSnapshot, StoreStats

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
        return replace(state, inner=inner, queue=rest, started=False, applied=applied)
    # Latched: every batch behind it is skipped.
    return replace(state, inner=inner, queue=(), started=False, applied=applied, error=cause)


def drain(state: BgState) -> BgState:
    """The writer applies every queued batch, in FIFO order.

    pre: check_background(state)
    raises: UndefinedInput
    post: check_background(__return__) and not __return__.queue
    """
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
    failed = _run_to_failure(queued)
    if failed is None:
        return ((queued, Ok()),)
    assert failed.error is not None
    return ((queued, Ok()), (replace(failed, seen=True), Latched(failed.error)))


def _ok_put_queues_the_batch(state: BgState, batch: Batch, result: Alternatives) -> bool:
    """A put that returns Ok with no failure latched has queued exactly its batch, last."""
    if state.error is not None or batch.empty or not result or result[0][1] != Ok():
        return True
    return result[0][0].queue == (*state.queue, batch)


def _after_drain(state: BgState, read: Callable[[State], tuple[State, model.Outcome]]) -> tuple[BgState, BgOutcome]:
    """Wait for the queue, report a latched failure, else ``read`` the inner store."""
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
    """
    return _after_drain(state, lambda inner: model.get_concatenated(inner, keys))


def read_into(state: BgState, keys: tuple[KeyArg, ...], buffer_nbytes: int | Invalid) -> tuple[BgState, BgOutcome]:
    """``get_concatenated`` into a caller's buffer (auxstore's extension).

    pre: check_background(state)
    pre: isinstance(buffer_nbytes, Invalid) or buffer_nbytes >= 0
    raises: UndefinedInput
    post: check_background(__return__[0]) and not __return__[0].queue
    """
    return _after_drain(state, lambda inner: model.read_into(inner, keys, buffer_nbytes))


def _open(inner: State) -> tuple[State, model.Outcome]:
    return inner, (Err(Kind.CLOSED) if inner.closed else Ok())


def flush(state: BgState) -> tuple[BgState, BgOutcome]:
    """Wait for every queued batch; report a latched failure.

    pre: check_background(state)
    raises: UndefinedInput
    post: check_background(__return__[0]) and not __return__[0].queue
    """
    return _after_drain(state, _open)


def enter(state: BgState) -> tuple[BgState, BgOutcome]:
    """Entering a ``with`` block: only a closed store fails. It does not wait
    for the writer, so it never reports a failure.

    pre: check_background(state)
    post: __return__[0] is state
    """
    return state, (Err(Kind.CLOSED) if state.closed else Ok())


def observe_inner(state: BgState) -> tuple[BgState, BgOutcome]:
    """``len``, ``in`` and ``stats``: like ``flush``; when Ok, they report the
    returned state's inner store (without changing its recency).

    pre: check_background(state)
    raises: UndefinedInput
    post: check_background(__return__[0])
    """
    return flush(state)


def close(state: BgState) -> tuple[BgState, BgOutcome]:
    """Drain, close the inner store, then report a latched failure, once.

    pre: check_background(state)
    raises: UndefinedInput
    post: check_background(__return__[0]) and __return__[0].closed
    post: not state.closed or __return__ == (state, Ok())
    """
    if state.closed:
        return state, Ok()
    drained = drain(state)
    inner, _ = model.close(drained.inner)
    closed = replace(drained, inner=inner, closed=True)
    if drained.error is not None:
        return replace(closed, seen=True), Latched(drained.error)
    return closed, Ok()


# ---------------------------------------------------------- the sequential reference


_LATCHED_MESSAGE = "a background write failed; the store stays failed"


def batch_of(objects: object, retain_keys: object, release_keys: object) -> Batch:
    """The model batch for a put's Python arguments (a snapshot of them)."""
    return Batch(binding.as_items(objects), binding.as_keys(retain_keys), binding.as_keys(release_keys))


class ReferenceBackgroundStore:
    """The executable reference of ``BackgroundBlockObjectStore``: the model's
    steps behind the public API, run on the calling thread.

    ``store_or_params`` is the inner store: a ``ReferenceStore`` (its current
    state is taken; use this object from then on), a model ``State``, or the
    ``ReferenceStore`` keyword arguments (``max_bytes``, ``object_nbytes``).
    With ``eager`` (the default) the writer runs to idle after every call, so
    a put reports its own batch's failure at once; otherwise batches wait
    until ``writer_step``/``run_writer``, a draining call, or a put that
    would block on a full queue (which runs the writer one batch, as the real
    owner waits for it).
    """

    def __init__(
        self,
        store_or_params: ReferenceStore | State | Mapping[str, int],
        *,
        max_pending_batches: int,
        profile: str | None = None,
        eager: bool = True,
    ) -> None:
        if isinstance(store_or_params, ReferenceStore):
            inner = store_or_params.state
        elif isinstance(store_or_params, State):
            inner = store_or_params
        else:
            inner = ReferenceStore(**store_or_params, profile=profile or "strict").state
        if profile is not None and profile != inner.profile:
            raise ValueError(f"profile {profile!r} differs from the inner store's {inner.profile!r}")
        created = new_background(inner, binding.as_size(max_pending_batches))
        if isinstance(created, Err):
            raise binding.exception_for(
                created.kind, inner.profile, f"max_pending_batches must be an int >= 1, got {max_pending_batches!r}"
            )
        self._state = created
        self._eager = eager
        self._cause: BaseException | None = None

    @property
    def state(self) -> BgState:
        return self._state

    @property
    def object_nbytes(self) -> int:
        return self._state.inner.object_nbytes

    @property
    def pending(self) -> int:
        """Batches queued and not yet applied."""
        return len(self._state.queue)

    def writer_step(self) -> None:
        """Apply the head batch; nothing to do on an idle writer."""
        if self._state.queue:
            self._state = writer_step(self._state)

    def run_writer(self, batches: int | None = None) -> int:
        """Apply up to ``batches`` queued batches (all when None); return how many."""
        done = 0
        while self._state.queue and (batches is None or done < batches):
            self.writer_step()
            done += 1
        return done

    def _raise(self, outcome: BgOutcome) -> None:
        if isinstance(outcome, Err):
            raise binding.exception_for(outcome.kind, self._state.profile, f"background store: {outcome.kind.value}")
        if isinstance(outcome, Latched):
            if self._cause is None:
                self._cause = _cause_exception(outcome.cause, self._state.profile)
            raise BlockObjectStoreError(_LATCHED_MESSAGE) from self._cause

    def put(
        self,
        objects: Iterable[object],
        *,
        retain_keys: Iterable[str] = (),
        release_keys: Iterable[str] = (),
    ) -> None:
        batch = batch_of(objects, retain_keys, release_keys)
        alternatives = put(self._state, batch)
        while not alternatives:  # full: the owner waits for the writer to take a batch
            self.writer_step()
            alternatives = put(self._state, batch)
        self._state, outcome = alternatives[0]
        if self._eager and outcome == Ok():
            self.run_writer()
            error = self._state.error
            if error is not None and not self._state.seen:
                self._state = replace(self._state, seen=True)
                outcome = Latched(error)
        self._raise(outcome)

    def _drained(self) -> None:
        if not (self._state.closed and self._state.profile == "strict"):
            self.run_writer()

    def get_concatenated(self, keys: list[str]) -> bytes:
        self._drained()
        wanted = binding.as_keys(keys)
        self._state, outcome = get_concatenated(self._state, wanted)
        self._raise(outcome)
        assert isinstance(outcome, Ok) and isinstance(outcome.value, bytes)
        return outcome.value

    def read_into(self, keys: list[str], buffer: object) -> int:
        self._drained()
        wanted = binding.as_keys(keys)
        view = binding.as_buffer(buffer)
        try:
            nbytes = view if isinstance(view, Invalid) else view.nbytes
            self._state, outcome = read_into(self._state, wanted, nbytes)
            self._raise(outcome)
            assert isinstance(outcome, Ok) and isinstance(outcome.value, bytes) and isinstance(view, memoryview)
            view[: len(outcome.value)] = outcome.value
            return len(outcome.value)
        finally:
            if isinstance(view, memoryview):
                view.release()

    def flush(self) -> None:
        self._drained()
        self._state, outcome = flush(self._state)
        self._raise(outcome)

    def close(self) -> None:
        if not self._state.closed:
            self.run_writer()
        self._state, outcome = close(self._state)
        self._raise(outcome)

    def __enter__(self) -> ReferenceBackgroundStore:
        self._state, outcome = enter(self._state)
        self._raise(outcome)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _observed(self, step: Callable[[State], tuple[State, model.Outcome]]) -> model.Value:
        """``len``, ``in`` or ``stats``: ``step`` on the inner store once the queue is drained."""
        self._drained()
        self._state, outcome = observe_inner(self._state)
        self._raise(outcome)
        answer = step(self._state.inner)[1]
        assert isinstance(answer, Ok)  # the inner store is open: observe_inner said so
        return answer.value

    def __len__(self) -> int:
        value = self._observed(model.length)
        assert isinstance(value, int)
        return value

    def __contains__(self, key: object) -> bool:
        return bool(self._observed(lambda inner: model.contains(inner, binding.as_key(key))))

    def stats(self) -> StoreStats:
        value = self._observed(model.stats)
        assert isinstance(value, model.Stats)
        return StoreStats(**vars(value))

    def snapshot(self) -> StoreSnapshot:
        """The inner store as it is now (queued batches not applied), without
        touching recency."""
        return observe(self._state.inner)


def _cause_exception(cause: str, profile: str) -> BaseException:
    if cause == FAULT:
        return RuntimeError("the inner store failed")
    return binding.exception_for(Kind(cause), profile, f"background write failed: {cause}")


# ------------------------------------------------------- driving a real background store
#
# A real store's writer is a thread. The driver wraps the inner store in a
# GatedStore whose put waits for a permit, so the writer advances only when
# the driver says: before each owner call, the writer stands exactly where the
# driver's model says (it has applied ``applied`` batches and, if one is
# queued, waits at the gate with it). What the driver cannot see is whether
# the writer has stored a failure in its latch yet; the model's alternatives
# cover that.

# The owner calls are the one op alphabet's (auxspec.ops); Release is the
# driver's own step for the writer.
Put, Get, ReadInto, Close = ops.Put, ops.Get, ops.ReadInto, ops.Close
Flush, Len, Contains, Stats, Enter, Exit = ops.Flush, ops.Len, ops.Contains, ops.Stats, ops.Enter, ops.Exit


@dataclass(frozen=True)
class Release:
    """Let the writer apply up to ``batches`` more queued batches."""

    batches: int = 1


OwnerCall = ops.Op
Op = OwnerCall | Release
DRAINING = (Get, ReadInto, Flush, Len, Contains, Stats, Close, Exit)


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
    ops: tuple[Op, ...]
    faults: tuple[tuple[int, Callable[[], BaseException]], ...] = ()
    inner: str = "store"


@dataclass(frozen=True)
class Target:
    """A background store implementation to drive: how to build its inner
    store, how to snapshot that inner store without touching it, and how to
    wrap an inner store in the background store."""

    label: str
    make_inner: Callable[[int, int], Any]  # (max_bytes, object_nbytes) -> store
    snapshot_inner: Callable[[Any], StoreSnapshot]
    make_background: Callable[[Any, Any], Any]  # (inner, max_pending_batches) -> background store


class Violation(AssertionError):
    """A real background store did something the spec does not allow."""


class GateTimeout(Exception):
    """The writer waited at the gate longer than the driver's timeout."""


class GatedStore:
    """An inner store whose ``put`` waits for a permit from the driver.

    It counts the calls that entered and finished, records every exception
    its ``put`` raised (so a latched error can be recognised by its cause),
    raises the injected faults, and takes a snapshot of the inner store just
    before closing it. Every wait has a timeout.
    """

    def __init__(
        self,
        inner: Any,
        snapshot: Callable[[Any], StoreSnapshot],
        *,
        faults: Mapping[int, Callable[[], BaseException]] | None = None,
        timeout: float = 10.0,
        gated: bool = True,
    ) -> None:
        self._inner = inner
        self._snapshot = snapshot
        self._faults = dict(faults or {})
        self._timeout = timeout
        self._cond = threading.Condition()
        self._permits = 0
        self._open = not gated
        self.entered = 0
        self.finished = 0
        self.timed_out = False
        self.raised: list[tuple[BaseException, str]] = []  # (exception, cause) per failed put
        self.final: StoreSnapshot | None = None
        self.closes = 0

    @property
    def object_nbytes(self) -> int:
        return int(self._inner.object_nbytes)

    # -- the driver's side
    def release(self, permits: int = 1) -> None:
        with self._cond:
            self._permits += permits
            self._cond.notify_all()

    def open(self) -> None:
        """Let every put through from now on (used when tearing down)."""
        with self._cond:
            self._open = True
            self._cond.notify_all()

    def wait_for(self, what: str, count: int, timeout: float | None = None) -> bool:
        """Wait until ``entered`` or ``finished`` reaches ``count``."""
        with self._cond:
            return bool(self._cond.wait_for(lambda: getattr(self, what) >= count, timeout or self._timeout))

    def cause_of(self, error: BaseException | None) -> str | None:
        """The cause kind, if ``error`` is one of the exceptions put raised."""
        for raised, cause in self.raised:
            if raised is error:
                return cause
        return None

    # -- the store's side (the writer thread)
    def put(self, objects: Any, *, retain_keys: Any = (), release_keys: Any = ()) -> None:
        with self._cond:
            index = self.entered
            self.entered += 1
            self._cond.notify_all()
            if not self._cond.wait_for(lambda: self._open or self._permits > 0, self._timeout):
                self.timed_out = True
            elif not self._open:
                self._permits -= 1
        fault: Callable[[], BaseException] | None = None
        try:
            if self.timed_out:
                raise GateTimeout(f"inner put #{index} waited at the gate for more than {self._timeout} s")
            fault = self._faults.get(index)
            if fault is not None:
                raise fault()
            self._inner.put(objects, retain_keys=retain_keys, release_keys=release_keys)
        except BaseException as error:
            kind = FAULT if fault is not None else binding.classify("put", error)
            with self._cond:
                self.raised.append((error, FAULT if kind is None else str(kind)))
            raise
        finally:
            with self._cond:
                self.finished += 1
                self._cond.notify_all()

    def get_concatenated(self, keys: list[str]) -> bytes:
        return bytes(self._inner.get_concatenated(keys))

    def read_into(self, keys: list[str], buffer: object) -> int:
        return int(self._inner.read_into(keys, buffer))

    def __len__(self) -> int:
        return len(self._inner)

    def __contains__(self, key: object) -> bool:
        return key in self._inner

    def stats(self) -> StoreStats:
        stats: StoreStats = self._inner.stats()
        return stats

    def close(self) -> None:
        self.closes += 1
        if self.final is None:
            self.final = self._snapshot(self._inner)
        self._inner.close()


_GRACE = 1.0  # seconds: how long a counter update may trail a call that returned


class _DelayedRelease(threading.Thread):
    """Gives the gate ``permits`` after ``delay`` seconds; ``fired`` is set
    first, so a call that returns before it is set did not wait."""

    def __init__(self, gate: GatedStore, permits: int, delay: float) -> None:
        super().__init__(name="auxspec-gate-release", daemon=True)
        self.gate, self.permits, self.delay = gate, permits, delay
        self.fired = threading.Event()
        self._cancel = threading.Event()

    def run(self) -> None:
        self._cancel.wait(self.delay)
        self.fired.set()
        self.gate.release(self.permits)

    def finish(self) -> None:
        self._cancel.set()
        self.join(10.0)


def _observed(name: str, error: BaseException, gate: GatedStore) -> BgOutcome | str:
    """What a call that raised ``error`` did, as a model outcome (or a
    description, when it raised something the protocol does not allow)."""
    cause = gate.cause_of(error.__cause__)
    if cause is not None and binding.is_store_error(error):
        return Latched(cause)
    kind = binding.classify(name, error)
    if kind is None:
        return f"unexpected {type(error).__name__}: {error}"
    if not str(error):
        return f"{type(error).__name__} with no message"
    return Err(kind)


def describe(op: Op) -> str:
    if isinstance(op, Release):
        return f"[writer may apply {op.batches} more batch(es)]"
    return ops.describe(op)


@dataclass
class RunReport:
    """What one driven run did (for counting and for messages)."""

    steps: int = 0
    inner_calls: int = 0
    blocked_puts: int = 0  # puts that had to wait for the writer (full queue)
    waiting_calls: int = 0  # reads, flushes, closes that had to wait for queued batches
    inflight_puts: int = 0  # puts made while a failure was in flight (either outcome allowed)
    built: bool = True  # False: the scenario checked a constructor error


class _Run:
    def __init__(self, target: Target, scenario: Scenario, delay: float, timeout: float) -> None:
        self.target, self.scenario, self.delay, self.timeout = target, scenario, delay, timeout
        self.log: list[str] = []
        self.report = RunReport()
        inner_state = _new_inner(scenario)
        inner: State | Invalid = Invalid("not a store") if scenario.inner == "none" else inner_state
        faults = (i for i, _ in scenario.faults)
        self.created = new_background(inner, binding.as_size(scenario.max_pending_batches), faults)
        self.threads_before = threading.active_count()
        self.gate = GatedStore(
            target.make_inner(scenario.max_bytes, scenario.object_nbytes),
            target.snapshot_inner,
            faults=dict(scenario.faults),
            timeout=timeout,
        )
        self.store: Any = None
        self.state: BgState  # the model's, from build() on

    def fail(self, why: str) -> None:
        s = self.scenario
        rows = [
            f"{self.target.label}: {why}",
            f"  store(max_bytes={s.max_bytes}, object_nbytes={s.object_nbytes}, "
            f"max_pending_batches={s.max_pending_batches!r}, profile={s.profile}"
            + (", inner store None" if s.inner == "none" else "")
            + (f", faults at inner calls {[i for i, _ in s.faults]}" if s.faults else "")
            + ")",
            *self.log,
        ]
        raise Violation("\n".join(rows))

    def build(self) -> BgState | None:
        """Build the store and check the constructor against the spec; the
        model's state, or None when the spec says it cannot be built."""
        s = self.scenario
        inner = None if s.inner == "none" else self.gate
        try:
            self.store = self.target.make_background(inner, s.max_pending_batches)
        except Exception as error:
            kind = binding.classify("new", error)
            if not isinstance(self.created, Err) or kind is not self.created.kind:
                self.fail(f"the constructor raised {type(error).__name__}: {error}; the spec says {self.created}")
            return None
        if isinstance(self.created, Err):
            self.fail(f"the constructor returned; the spec says {_show(self.created)}")
        assert isinstance(self.created, BgState)
        for name, want in (("object_nbytes", s.object_nbytes), ("max_pending_batches", s.max_pending_batches)):
            got = getattr(self.store, name, want)
            if got != want:
                self.fail(f"{name} is {got!r}, not {want!r}")
        return self.created

    def settle(self) -> None:
        """Wait until the writer stands where the model says: a queued batch is
        taken and waits at the gate."""
        state = self.state
        if state.queue and not state.started:
            if not self.gate.wait_for("entered", state.applied + 1):
                self.fail("the writer did not take a queued batch")
            self.state = writer_take(state)

    def release(self, batches: int) -> None:
        for _ in range(batches):
            if not self.state.queue:
                return
            self.gate.release(1)
            if not self.gate.wait_for("finished", self.state.applied + 1):
                self.fail("the writer did not finish a released batch")
            self.state = writer_step(self.state)
            self.settle()

    def call(self, op: OwnerCall) -> BgOutcome | str:
        try:
            value = ops.invoke(self.store, op)
        except Exception as error:
            return _observed(op.name, error, self.gate)
        return Ok(value)

    def owner(self, op: OwnerCall) -> None:
        state = self.state
        if isinstance(op, Put):
            self.put(op)
        else:
            self.draining(op, 0 if isinstance(op, Enter) else inner_calls_to_drain(state))
        try:
            repr(self.store)  # in every state the calls leave it in
        except Exception as error:
            self.fail(f"repr(store) raised {type(error).__name__}: {error}")

    def draining(self, op: OwnerCall, waits: int) -> None:
        """A call that returns only once ``waits`` queued batches are applied."""
        state = self.state
        releaser = _DelayedRelease(self.gate, waits, self.delay) if waits else None
        if releaser is not None:
            self.report.waiting_calls += 1
            releaser.start()
        observed, early = self._call_released(op, releaser)
        if early:
            self.fail(f"{describe(op)} returned before the {waits} queued batch(es) were applied")
        # It waited for the queue, so the writer is done with it already.
        if not self.gate.wait_for("finished", state.applied + waits, _GRACE):
            done = self.gate.finished - state.applied
            self.fail(f"{describe(op)} returned when the writer had applied {done} of {waits} queued batch(es)")
        after, expected = _background_step(state, op)
        if observed != expected:
            self.fail(f"expected {_show(expected)}, got {_show(observed)}")
        self.state = after
        if isinstance(op, (Close, Exit)) and expected != Err(Kind.CLOSED):
            self.check_closed()

    def _call_released(self, op: OwnerCall, releaser: _DelayedRelease | None) -> tuple[BgOutcome | str, bool]:
        """Make the owner call while ``releaser`` (if any) lets the writer go
        after a delay; the outcome, and whether the call returned before it did."""
        observed = self.call(op)
        early = releaser is not None and not releaser.fired.is_set()
        if releaser is not None:
            releaser.finish()
        self.log.append(f"     -> {_show(observed)}")
        return observed, early

    def put(self, op: ops.Put) -> None:
        state = self.state
        batch = Batch(*ops.put_args(op))
        blocked = not put(state, batch)
        releaser = None
        if blocked:
            self.report.blocked_puts += 1
            # The queue is full: the call may return only after the writer
            # finishes the batch it holds and takes the next one.
            releaser = _DelayedRelease(self.gate, 1, self.delay)
            releaser.start()
        observed, early = self._call_released(op, releaser)
        if early:
            self.fail(f"put returned while {state.max_pending_batches} batch(es) waited unstarted")
        if releaser is not None:
            # It waited for the writer to take a batch, so the one before is done.
            if not self.gate.wait_for("finished", state.applied + 1, _GRACE):
                self.fail("put returned from a full queue before the writer finished a batch")
            self.state = writer_step(self.state)
            self.settle()
        alternatives = put(self.state, batch)
        self.report.inflight_puts += len(alternatives) > 1
        matching = [s for s, outcome in alternatives if outcome == observed and s.applied == self.gate.finished]
        if not matching:
            allowed = " or ".join(_show(o) for _, o in alternatives)
            self.fail(f"expected {allowed}, got {_show(observed)}")
        self.state = matching[0]
        self.settle()

    def check_closed(self) -> None:
        final = self.gate.final
        expected = observe(self._open_inner)
        if final is None:
            self.fail("close() did not close the inner store")
        elif final != expected:
            self.fail(f"the inner store before close holds {final}, the spec says {expected}")
        alive = threading.active_count()
        if alive != self.threads_before:
            self.fail(f"{alive - self.threads_before} thread(s) outlived close()")

    _open_inner: State  # the inner state just before the first close

    def run(self) -> RunReport:
        built = self.build()
        if built is None:
            self.gate.close()
            self.report.built = False
            return self.report
        self.state = built
        ops_ = self.scenario.ops
        try:
            self.settle()
            for op in (*ops_, Close()):
                self.report.steps += 1
                if isinstance(op, (Close, Exit)) and not self.state.closed:
                    self._open_inner = drain(self.state).inner
                self.log.append(f"  {self.report.steps:>3}. {describe(op)}")
                if isinstance(op, Release):
                    self.release(op.batches)
                else:
                    self.owner(op)
            if self.gate.timed_out:
                self.fail("the writer waited at the gate until it timed out")
            if self.gate.entered != self.state.applied or self.gate.finished != self.state.applied:
                self.fail(f"the writer made {self.gate.finished} inner calls, the spec {self.state.applied}")
            sequential = sequential_final(self.scenario)
            if observe(self._open_inner) != observe(sequential):
                self.fail("the final state differs from the sequential spec's")
            self.report.inner_calls = self.gate.finished
            return self.report
        finally:
            self.gate.open()
            if not self.state.closed:
                with contextlib.suppress(Exception):  # already failing; only the cleanup matters
                    self.store.close()


def _background_step(state: BgState, op: OwnerCall) -> tuple[BgState, BgOutcome]:
    """The background model's step for an owner call other than put, when
    the writer makes no progress during the call but what it must."""
    if isinstance(op, (Get, ReadInto)):
        keys, buffer = ops.read_args(op)
        return get_concatenated(state, keys) if buffer is None else read_into(state, keys, buffer)
    if isinstance(op, (Close, Exit)):
        return close(state)
    if isinstance(op, Enter):
        return enter(state)
    after, outcome = observe_inner(state)  # flush, len, in, stats
    if isinstance(outcome, Ok) and not isinstance(op, Flush):
        outcome = ops.spec_step(after.inner, op)[1]
    return after, outcome


def _show(outcome: BgOutcome | str) -> str:
    if isinstance(outcome, str):
        return outcome
    if isinstance(outcome, Latched):
        return f"BlockObjectStoreError from a {outcome.cause} failure"
    if isinstance(outcome, Err):
        return f"error {outcome.kind.value}"
    return "ok" if outcome.value is None else f"ok {outcome.value!r}"


def sequential_final(scenario: Scenario) -> State:
    """The inner state just before the first close when the owner calls of
    ``scenario`` run with the writer applied eagerly: the same whatever the
    writer's schedule, since reads wait for the queue and a failure stops it."""
    bound = binding.as_size(scenario.max_pending_batches)
    created = new_background(_new_inner(scenario), bound, (i for i, _ in scenario.faults))
    assert isinstance(created, BgState)
    state = created
    for op in scenario.ops:
        if isinstance(op, Release):
            continue
        if isinstance(op, (Close, Exit)):
            break
        if isinstance(op, Put):
            state = put(drain(state), Batch(*ops.put_args(op)))[0][0]
        else:
            state = _background_step(state, op)[0]
        state = drain(state)
    return drain(state).inner


def _new_inner(scenario: Scenario) -> State:
    inner = model.new(scenario.max_bytes, scenario.object_nbytes, scenario.profile)
    assert isinstance(inner, State), "scenario sizes are invalid"
    return inner


def run_scenario(target: Target, scenario: Scenario, *, delay: float = 0.002, timeout: float = 10.0) -> RunReport:
    """Drive ``target`` through ``scenario`` with the writer under control and
    check the constructor, every owner outcome, the writer's inner calls, the
    final inner state and that no thread outlives close. Raises ``Violation``
    with the trace.

    ``delay``: how long a call that must wait for the writer (a read with
    batches queued, a put on a full queue) is given to return early (wrongly)
    before the writer is let go. A correct store always passes; a shorter
    delay only makes an early return less likely to be caught.
    """
    return _Run(target, scenario, delay, timeout).run()


def auxstore_target(background: Callable[..., Any] | None = None, label: str = "auxstore") -> Target:
    """auxstore's background store over auxstore's ``BlockObjectStore``;
    ``background`` replaces the background class (a variant under test)."""
    import auxstore

    cls = background or auxstore.BackgroundBlockObjectStore
    return Target(
        label,
        lambda max_bytes, nbytes: auxstore.BlockObjectStore(max_bytes=max_bytes, object_nbytes=nbytes),
        lambda store: store.snapshot(),
        lambda inner, bound: cls(inner, max_pending_batches=bound),
    )


def upstream_target() -> Target | None:
    """vLLM's background store over vLLM's store, or None when vLLM's module
    is not available (see ``auxspec.targets``)."""
    from auxspec import targets

    module = targets.load_upstream()
    if module is None:
        return None
    return Target(
        "vLLM",
        lambda max_bytes, nbytes: module.BlockObjectStore(max_bytes=max_bytes, object_nbytes=nbytes),
        targets.observe_vllm,
        lambda inner, bound: module.BackgroundBlockObjectStore(inner, max_pending_batches=bound),
    )


def _follow(state: BgState, call: OwnerCall) -> BgState:
    """The state after ``call`` when the writer makes no progress during it
    (except the one batch a put on a full queue waits for)."""
    if isinstance(call, Put):
        batch = Batch(*ops.put_args(call))
        alternatives = put(state, batch)
        while not alternatives:
            state = writer_step(state)
            alternatives = put(state, batch)
        return alternatives[0][0]
    return _background_step(state, call)[0]


def writer_schedules(state: BgState, calls: tuple[OwnerCall, ...]) -> Iterator[tuple[Op, ...]]:
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
        prefix: tuple[Op, ...] = (Release(applied), calls[0]) if applied else (calls[0],)
        for rest in writer_schedules(_follow(before, calls[0]), calls[1:]):
            yield prefix + rest


# ------------------------------------------------------------------ generation

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
    from hypothesis import strategies as st

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
            st.sampled_from(ops.FORMS) if strict else st.just("list"),
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


__all__ = [
    "FAULT",
    "Batch",
    "BgOutcome",
    "BgState",
    "Close",
    "Contains",
    "Enter",
    "Exit",
    "Flush",
    "GatedStore",
    "Get",
    "Latched",
    "Len",
    "Put",
    "ReadInto",
    "ReferenceBackgroundStore",
    "Release",
    "RunReport",
    "Scenario",
    "Stats",
    "Target",
    "Violation",
    "auxstore_target",
    "background_violations",
    "batch_of",
    "check_background",
    "close",
    "drain",
    "enter",
    "flush",
    "get_concatenated",
    "has_room",
    "inner_calls_to_drain",
    "new_background",
    "observe_inner",
    "put",
    "read_into",
    "run_scenario",
    "scenarios",
    "sequential_final",
    "upstream_target",
    "writer_schedules",
    "writer_step",
    "writer_take",
]
