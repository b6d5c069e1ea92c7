"""Fault injection for exception safety: interrupt a call at every line, or at random times.

Two injectors, both generic (they know nothing of any store):

- ``sweep``: runs a ``Scenario``'s call once to count the lines it executes in
  the files under test (``sys.settrace``), then once per line number N with a
  tracer that raises ``exc_type`` just before the Nth such line. After each
  interrupted run the target must be exactly in its state before the call,
  exactly in its state after the whole call, or broken (the scenario says
  what broken means: for a store, every later call raises its broken error).
  Targets in the before/after state must also *behave* as a fresh target in
  that state does (``Scenario.follow_up``), which catches damage that the
  observation misses (a leaked slot, a stale index).
- ``signal_storm``: runs a loop of calls for a bounded time with a real
  ``SIGALRM`` (``setitimer``) that raises ``exc_type`` from the signal handler
  at a random moment of each call: the interruptions land inside C calls'
  boundaries and at bytecodes the line tracer never sees.

Only the calling thread is traced (``sys.settrace``); pass ``threads=True``
to also trace threads started during the call (``threading.settrace``).
"""

from __future__ import annotations

import functools
import gc
import random
import signal
import sys
import threading
import time
from collections.abc import Callable, Collection, Hashable
from dataclasses import dataclass, field
from types import FrameType
from typing import Any, Generic, Protocol, TypeVar

T = TypeVar("T")
TraceFunction = Callable[[FrameType, str, Any], Any]


class InjectedInterrupt(KeyboardInterrupt):
    """What the injectors raise by default: a ``KeyboardInterrupt`` the test can tell from a real one."""


class InjectedMemoryError(MemoryError):
    """The other injected exception: an allocation failure at any line."""


class Scenario(Protocol[T]):
    """One call to interrupt, on a target that ``setup`` builds afresh each time."""

    name: str

    def setup(self) -> T:
        """A new target in the state before the call (deterministic)."""
        ...

    def call(self, target: T) -> object:
        """The call to interrupt (its own exceptions are part of its outcome)."""
        ...

    def observe(self, target: T) -> Hashable:
        """The target's observable state, without changing it."""
        ...

    def check(self, target: T) -> None:
        """Raise if the target's internal invariants fail."""
        ...

    def is_broken(self, target: T) -> bool:
        """Whether the target is marked broken (every later call refused)."""
        ...

    def follow_up(self, target: T) -> Hashable:
        """Outcomes of a few later calls (may change the target)."""
        ...


@dataclass
class SweepResult:
    name: str
    points: int = 0
    before: int = 0
    after: int = 0
    broken: int = 0
    bad: list[str] = field(default_factory=list)

    def add(self, other: SweepResult) -> None:
        self.points += other.points
        self.before += other.before
        self.after += other.after
        self.broken += other.broken
        self.bad.extend(other.bad)

    def __str__(self) -> str:
        return (
            f"{self.name}: {self.points} points: {self.before} as before, {self.after} as after, "
            f"{self.broken} marked broken, {len(self.bad)} wrong"
        )


class _LineTracer:
    """Counts line events in frames whose file is in ``files``; raises at the ``stop``-th."""

    def __init__(
        self, files: Collection[str], stop: int | None, exc_type: type[BaseException], opcodes: bool = False
    ) -> None:
        self.files = files
        self.event = "opcode" if opcodes else "line"
        self.stop = stop
        self.exc_type = exc_type
        self.count = 0
        self.fired = False

    def global_trace(self, frame: FrameType, event: str, arg: Any) -> TraceFunction | None:
        if frame.f_code.co_filename in self.files and not self.fired:
            if self.event == "opcode":
                frame.f_trace_opcodes = True
            return self.local_trace
        return None

    def local_trace(self, frame: FrameType, event: str, arg: Any) -> TraceFunction | None:
        if self.fired:
            return None
        if event == self.event:
            self.count += 1
            if self.count == self.stop:
                self.fired = True
                raise self.exc_type(
                    f"injected before {self.event} {frame.f_lasti if self.event == 'opcode' else frame.f_lineno} "
                    f"(line {frame.f_lineno}) of {frame.f_code.co_name}"
                )
        return self.local_trace


def run_traced(
    call: Callable[[], object],
    files: Collection[str],
    stop: int | None = None,
    exc_type: type[BaseException] = InjectedInterrupt,
    threads: bool = False,
    opcodes: bool = False,
) -> tuple[int, BaseException | None]:
    """Run ``call`` under the line tracer. Returns the number of lines counted
    and the exception the call ended with (None if it returned); the injected
    exception, if it fired, is among them."""
    tracer = _LineTracer(files, stop, exc_type, opcodes)
    old, old_threads = sys.gettrace(), threading.gettrace()  # coverage's own tracers, say
    # No collection during the call: a cycle collected there runs finalizers
    # (a dropped store's weakref.finalize, in the files under test) in this
    # thread, whose lines the tracer would count as the call's. The Nth point
    # then moved from run to run, and an injection landing in a finalizer is
    # swallowed ("ignored"), so the call seemed to ignore the interruption.
    collecting = gc.isenabled()
    gc.disable()  # not gc.collect() first: a full collection per injection point costs more than the sweep
    sys.settrace(tracer.global_trace)
    if threads:
        threading.settrace(tracer.global_trace)
    try:
        call()
    except BaseException as error:
        return tracer.count, error
    finally:
        sys.settrace(old)
        if threads:
            threading.settrace(old_threads)  # type: ignore[arg-type]
        if collecting:
            gc.enable()
    return tracer.count, None


def sweep(
    scenario: Scenario[T],
    files: Collection[str],
    exc_type: type[BaseException] = InjectedInterrupt,
    opcodes: bool = False,
) -> SweepResult:
    """Interrupt ``scenario.call`` before each line (or, with ``opcodes``, each
    bytecode) it executes in ``files``; classify each point."""
    result = SweepResult(scenario.name)
    before_target = scenario.setup()
    before = scenario.observe(before_target)
    before_follow = scenario.follow_up(before_target)
    after_target = scenario.setup()
    points, _ = run_traced(lambda: scenario.call(after_target), files, opcodes=opcodes)
    after = scenario.observe(after_target)
    after_follow = scenario.follow_up(after_target)
    result.points = points
    for stop in range(1, points + 1):
        target = scenario.setup()
        _, error = run_traced(functools.partial(scenario.call, target), files, stop, exc_type, opcodes=opcodes)
        where = f"{scenario.name} point {stop}: {type(error).__name__}: {error}"
        if not isinstance(error, exc_type):
            result.bad.append(f"{where}: the injected exception did not come out")
            continue
        try:
            scenario.check(target)
        except BaseException as problem:
            result.bad.append(f"{where}: invariants: {type(problem).__name__}: {problem}")
            continue
        if scenario.is_broken(target):
            result.broken += 1
            continue
        seen = scenario.observe(target)
        if seen == before:
            expected_follow, kind = before_follow, "before"
        elif seen == after:
            expected_follow, kind = after_follow, "after"
        else:
            result.bad.append(f"{where}: state is neither before nor after: {seen!r}")
            continue
        follow = scenario.follow_up(target)
        if follow != expected_follow:
            result.bad.append(f"{where}: looks {kind} but later calls give {follow!r}, not {expected_follow!r}")
            continue
        if kind == "before":
            result.before += 1
        else:
            result.after += 1
    return result


# ------------------------------------------------------------ real signals


class Stepper(Protocol, Generic[T]):
    """A target driven by real signals, checked against an oracle after every call."""

    def new(self) -> T:
        """A fresh target (and reset the oracle to match it)."""
        ...

    def step(self, target: T, rng: random.Random) -> Callable[[], object]:
        """Choose the next call; prepare the oracle's before and after; return the call on the target."""
        ...

    def settle(self, target: T, interrupted: bool, outcome: object) -> str | None:
        """After the call: check the target (as before, as after, or broken, if
        interrupted; as after with the oracle's outcome otherwise). Returns
        "broken" when the target must be replaced, an error message when it is
        wrong, None when it is fine."""
        ...


@dataclass
class StormResult:
    calls: int = 0
    interrupted: int = 0
    broken: int = 0
    bad: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return (
            f"{self.calls} calls, {self.interrupted} interrupted by a real signal, "
            f"{self.broken} marked broken, {len(self.bad)} wrong"
        )


def signal_storm(
    stepper: Stepper[T],
    seconds: float,
    *,
    max_delay: float = 200e-6,
    exc_type: type[BaseException] = InjectedInterrupt,
    seed: int = 0,
    max_bad: int = 20,
) -> StormResult:
    """Call ``stepper``'s calls in a loop for ``seconds``, each with a real SIGALRM
    set to raise ``exc_type`` after a random delay in ``[0, max_delay]``."""
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("signals are delivered to the main thread only")
    rng = random.Random(seed)
    result = StormResult()
    armed = False

    def on_alarm(signum: int, frame: FrameType | None) -> None:
        if armed:
            raise exc_type("a real SIGALRM")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    try:
        target = stepper.new()
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            call = stepper.step(target, rng)
            outcome: object = None
            interrupted = False
            try:
                armed = True
                signal.setitimer(signal.ITIMER_REAL, rng.uniform(1e-6, max_delay))
                try:
                    outcome = call()
                finally:
                    armed = False
                    signal.setitimer(signal.ITIMER_REAL, 0)
            except exc_type:
                interrupted = True
            except Exception as error:
                outcome = error
            result.calls += 1
            result.interrupted += interrupted
            verdict = stepper.settle(target, interrupted, outcome)
            if verdict == "broken" or verdict == "new":
                result.broken += verdict == "broken"
                target = stepper.new()
            elif verdict is not None:
                result.bad.append(verdict)
                if len(result.bad) >= max_bad:
                    break
                target = stepper.new()
    finally:
        armed = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    return result
