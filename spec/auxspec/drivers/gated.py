"""Driving a real background store with its writer under the test's control.

A real store's writer is a thread. The driver wraps the inner store in a
``GatedStore`` whose put waits for a permit, so the writer advances only when
the driver says: before each owner call, the writer stands exactly where the
background model (``auxspec.models.background``) says. What the driver cannot
see is whether the writer has stored a failure in its latch yet; the model's
alternatives cover that.
"""

from __future__ import annotations

import contextlib
import gc
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from auxspec.engine.compare import raised_by_verifier, show_bytes
from auxspec.engine.expect import background_batch, background_step
from auxspec.engine.observable import as_snapshot, observed
from auxspec.engine.ops import Close, Op, Put
from auxspec.engine.table import describe as describe_op
from auxspec.engine.table import invoke, kind_of
from auxspec.engine.target import Target, load_target, load_upstream, observe_vllm
from auxspec.generators.background import Release, Scenario, Step
from auxspec.models import sequential as model
from auxspec.models.background import (
    FAULT,
    BgOutcome,
    BgState,
    Latched,
    OwnerCall,
    drain,
    drop,
    inner_calls_to_drain,
    new_background,
    put,
    writer_step,
    writer_take,
)
from auxspec.models.sequential import Err, Invalid, Kind, Ok, State
from auxspec.reference import binding
from auxspec.reference.store import Snapshot as StoreSnapshot
from auxspec.reference.store import observe

# ------------------------------------------------------- driving a real background store
#
# A real store's writer is a thread. The driver wraps the inner store in a
# GatedStore whose put waits for a permit, so the writer advances only when
# the driver says: before each owner call, the writer stands exactly where the
# driver's model says (it has applied ``applied`` batches and, if one is
# queued, waits at the gate with it). What the driver cannot see is whether
# the writer has stored a failure in its latch yet; the model's alternatives
# cover that.


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
        snapshot: Callable[[Any], StoreSnapshot | None],
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
        self.active = time.monotonic()  # the driver's last step (``touch``)
        self.raised: list[tuple[BaseException, str]] = []  # (exception, cause) per failed put
        self.final: StoreSnapshot | None = None
        self.closes = 0
        self.closed_at: tuple[int, int] | None = None  # (entered, finished) puts when first closed

    @property
    def object_nbytes(self) -> int:
        return int(self._inner.object_nbytes)

    # -- the driver's side
    def release(self, permits: int = 1) -> None:
        with self._cond:
            self._permits += permits
            self._cond.notify_all()

    def touch(self) -> None:
        """The driver takes a step: a held writer's timeout starts again."""
        self.active = time.monotonic()

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
            # Held for as long as the driver is busy: the timeout counts from
            # its last step (a depth life holds one batch behind a thousand puts).
            while not (self._open or self._permits > 0):
                left = self.active + self._timeout - time.monotonic()
                if left <= 0:
                    self.timed_out = True
                    break
                self._cond.wait(left)
            if not self.timed_out and not self._open:
                self._permits -= 1
        fault: Callable[[], BaseException] | None = None
        try:
            if self.timed_out:
                raise GateTimeout(
                    f"inner put #{index} waited at the gate {self._timeout} s after the driver's last step"
                )
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

    def stats(self) -> Any:
        return self._inner.stats()

    def close(self) -> None:
        with self._cond:
            self.closes += 1
            if self.closed_at is None:
                self.closed_at = (self.entered, self.finished)
            self._cond.notify_all()
        if self.final is None:
            self.final = self._snapshot(self._inner)
        self._inner.close()


_GRACE = 1.0  # seconds: how long a counter update may trail a call that returned
# Seconds a dropped store's writer is given to apply what is queued, close the
# inner store and end: far more than a correct one needs (no call waits for it,
# so a port whose writer never ends is reported after this, not hung on).
DROP_WAIT = 3.0
_RELEASER = "auxspec-gate-release"


class _DelayedRelease(threading.Thread):
    """Gives the gate ``permits`` after ``delay`` seconds; ``fired`` is set
    first, so a call that returns before it is set did not wait."""

    def __init__(self, gate: GatedStore, permits: int, delay: float) -> None:
        super().__init__(name=_RELEASER, daemon=True)
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


def describe(op: Step) -> str:
    if isinstance(op, Release):
        return f"[writer may apply {op.batches} more batch(es)]"
    return describe_op(op)


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
        self.threads_before = set(threading.enumerate())
        self.gate = GatedStore(
            target.factory(scenario.max_bytes, scenario.object_nbytes),
            _snapshot_of(target),
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
            self.store = _background_of(self.target)(inner, max_pending_batches=s.max_pending_batches)
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
        # All the permits at once (one wait, not two thread switches per
        # batch: a depth life releases a thousand), but never more than the
        # batches the writer will apply: a permit left over after a latched
        # failure would let a later batch past the gate.
        count = min(batches, inner_calls_to_drain(self.state))
        if count <= 0:
            return
        self.gate.release(count)
        if not self.gate.wait_for("finished", self.state.applied + count):
            self.fail(f"the writer did not finish the {count} released batch(es)")
        for _ in range(count):
            self.state = writer_step(self.state)
        self.settle()

    def call(self, op: Op) -> BgOutcome | str:
        try:
            value = invoke(self.store, op)
        except Exception as error:
            if raised_by_verifier(error):
                raise  # the driver's own failure, not the store's
            return _observed(op.name, error, self.gate)
        return Ok(value)

    def owner(self, op: Op) -> None:
        state = self.state
        owner = kind_of(op).owner
        if owner is OwnerCall.PUT:
            self.put(op)  # type: ignore[arg-type]
        else:
            self.draining(op, 0 if owner is OwnerCall.ENTER else inner_calls_to_drain(state))
        try:
            repr(self.store)  # in every state the calls leave it in
        except Exception as error:
            self.fail(f"repr(store) raised {type(error).__name__}: {error}")

    def draining(self, op: Op, waits: int) -> None:
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
        after, expected = background_step(state, op)
        if observed != expected:
            self.fail(f"expected {_show(expected)}, got {_show(observed)}")
        self.state = after
        if kind_of(op).owner is OwnerCall.CLOSE and expected != Err(Kind.CLOSED):
            self.check_closed()

    def _call_released(self, op: Op, releaser: _DelayedRelease | None) -> tuple[BgOutcome | str, bool]:
        """Make the owner call while ``releaser`` (if any) lets the writer go
        after a delay; the outcome, and whether the call returned before it did."""
        observed = self.call(op)
        early = releaser is not None and not releaser.fired.is_set()
        if releaser is not None:
            releaser.finish()
        self.log.append(f"     -> {_show(observed)}")
        return observed, early

    def put(self, op: Put) -> None:
        state = self.state
        batch = background_batch(op)
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

    def check_closed(self, how: str = "close()") -> None:
        final = self.gate.final
        expected = observe(self._open_inner)
        if final is None:
            self.fail(f"{how} did not close the inner store")
        elif final != expected and (
            # Compared as verify compares states: the pinned keys' order is observable only under upstream.
            self.target.exact_order or self.scenario.profile != "strict" or observed(final) != observed(expected)
        ):
            self.fail(f"the inner store before {how} closed it holds {final}, the spec says {expected}")
        alive = self.new_threads()
        if alive:
            self.fail(f"{len(alive)} thread(s) outlived {how}: {', '.join(sorted(t.name for t in alive))}")

    def new_threads(self) -> list[threading.Thread]:
        """The threads still running that the store started (the driver's own releasers aside)."""
        return [t for t in threading.enumerate() if t not in self.threads_before and t.name != _RELEASER]

    def drop(self) -> None:
        """The ``drop`` ending: let go of the store without closing it, then
        let the writer go and check, through the inner store, that it applied
        every queued batch in order (up to a failure), closed the inner store
        once, after the last put (not again if it was closed already), and
        ended. Every wait is bounded by ``DROP_WAIT``."""
        state = self.state
        expected = drop(state)
        closes = self.gate.closes
        if not state.closed:
            self._open_inner = drain(state).inner
        try:
            collected: Callable[[], object] = weakref.ref(self.store)
        except TypeError:  # a class without weak references: only the collector can say
            collected = lambda: None  # noqa: E731
        self.store = None  # the driver's only reference
        if collected() is not None:  # in a reference cycle: the cyclic collector frees it
            gc.collect()
        deadline = time.monotonic() + DROP_WAIT
        # No batch moves until now, so a store that closes its inner store at
        # once (under the writer's held put) is caught in the act.
        self.gate.open()
        if collected() is not None:
            self.fail(
                "the dropped store is still referenced after gc.collect() (by its own writer thread?), "
                "so dropping it cannot end its writer"
            )
        if not state.closed:
            self.gate.wait_for("closes", closes + 1, max(deadline - time.monotonic(), 0.001))
        for thread in self.new_threads():
            thread.join(max(0.0, deadline - time.monotonic()))
        alive = self.new_threads()
        if alive:
            self.fail(
                f"{len(alive)} thread(s) still ran {DROP_WAIT:g} s after the store was dropped "
                f"({', '.join(sorted(t.name for t in alive))}): its writer must end once the queued batches are applied"
            )
        done, closed_at = self.gate.finished, self.gate.closed_at
        if state.closed:
            if self.gate.closes != closes:
                self.fail(f"dropping the closed store closed the inner store again ({self.gate.closes} closes)")
        elif self.gate.closes == closes:
            self.fail(f"the inner store was not closed {DROP_WAIT:g} s after the store was dropped")
        elif self.gate.closes > closes + 1:
            self.fail(f"the dropped store closed its inner store {self.gate.closes - closes} times, not once")
        elif closed_at != (expected.applied, expected.applied):
            entered, finished = closed_at or (0, 0)
            running = " while one ran" if entered > finished else ""
            self.fail(
                f"the dropped store closed its inner store after {finished} inner put(s){running}; "
                f"the spec says after all {expected.applied} (the queued batches first)"
            )
        if self.gate.entered != expected.applied or done != expected.applied:
            self.fail(
                f"after the drop the writer made {self.gate.entered} inner calls ({done} finished), "
                f"the spec {expected.applied}"
            )
        self.state = expected
        if not state.closed:
            self.check_closed("the drop")

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
            dropped = self.scenario.ending == "drop"
            for op in ops_ if dropped else (*ops_, Close()):
                self.report.steps += 1
                if not isinstance(op, Release) and kind_of(op).owner is OwnerCall.CLOSE and not self.state.closed:
                    self._open_inner = drain(self.state).inner
                self.log.append(f"  {self.report.steps:>3}. {describe(op)}")
                self.gate.touch()
                if isinstance(op, Release):
                    self.release(op.batches)
                else:
                    self.owner(op)
            if dropped:
                self.report.steps += 1
                self.log.append(f"  {self.report.steps:>3}. [the owner drops the store without closing it]")
                self.drop()
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
            if not self.state.closed and self.store is not None:
                with contextlib.suppress(Exception):  # already failing; only the cleanup matters
                    self.store.close()


def _show(outcome: BgOutcome | str) -> str:
    if isinstance(outcome, str):
        return outcome
    if isinstance(outcome, Latched):
        return f"BlockObjectStoreError from a {outcome.cause} failure"
    if isinstance(outcome, Err):
        return f"error {outcome.kind.value}"
    if isinstance(outcome.value, bytes):
        return f"ok {show_bytes(outcome.value)}"  # a payload as its length and first bytes, not a 24 KB line
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
        owner = kind_of(op).owner
        if owner is OwnerCall.CLOSE:
            break
        if owner is OwnerCall.PUT:
            state = put(drain(state), background_batch(op))[0][0]  # type: ignore[arg-type]
        else:
            state = background_step(state, op)[0]
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
    bundled = load_target(None)
    return replace(bundled, label=label, background=background or bundled.background)


def upstream_target() -> Target | None:
    """vLLM's background store over vLLM's store, or None when vLLM's module
    is not available (see ``auxspec.engine.target``)."""
    module = load_upstream()
    if module is None:
        return None
    return Target(
        "vLLM",
        lambda max_bytes, nbytes: module.BlockObjectStore(max_bytes=max_bytes, object_nbytes=nbytes),
        observe_vllm,
        background=module.BackgroundBlockObjectStore,
    )


def _snapshot_of(target: Target) -> Callable[[Any], StoreSnapshot | None]:
    if target.observe is None:
        raise LookupError(f"{target.label}: the background driver needs to see the inner store (a snapshot())")
    seen = target.observe

    def snapshot(inner: Any) -> StoreSnapshot | None:
        state = seen(inner)  # any sequence of three, as the sequential compare takes it
        return None if state is None else as_snapshot(state)

    return snapshot


def _background_of(target: Target) -> Callable[..., Any]:
    if target.background is None:
        raise LookupError(f"{target.label} has no background store class")
    return target.background
