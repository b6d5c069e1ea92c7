"""The one differential check: a trace on the spec and on a target, op by op.

Every driver (``verify``, vector replay, the Hypothesis machine, the fuzz
harnesses, the background driver's sequential part) judges a target with
``compare`` or ``check_step`` and reports a ``Divergence``.
"""

from __future__ import annotations

import contextlib
import traceback
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from auxspec.engine import traces
from auxspec.engine.deviations import deviation
from auxspec.engine.expect import initial_state, spec_steps
from auxspec.engine.observable import observed
from auxspec.engine.ops import Op, Trace
from auxspec.engine.table import describe, invoke
from auxspec.engine.target import PortBroken, Target
from auxspec.models.sequential import Err, Ok, Outcome, State
from auxspec.reference import binding
from auxspec.reference.store import Snapshot, observe


@dataclass(frozen=True)
class Divergence:
    """The first step at which a target and the spec disagree."""

    trace: Trace
    step: int  # index into trace.ops; -1: the constructor
    expected: str
    actual: str
    want: Outcome | None = None  # the spec's outcome at that step
    got: Outcome | None = None  # the target's, when it had one (not an exception of no kind)
    got_snapshot: Snapshot | None = None  # the target's state after the step, when it can be seen
    before: State | None = None  # the spec's state before the step

    @property
    def op(self) -> Op | None:
        return self.trace.ops[self.step] if self.step >= 0 else None

    @property
    def deviation(self) -> str | None:
        """The documented strict-vs-vLLM deviation this is exactly, if any:
        the op, the spec's outcome, the target's outcome and (where the
        deviation says how the state changes) the target's state must all be
        the deviation's (see ``engine.deviations``)."""
        if self.trace.profile != "strict":
            return None
        return deviation(self.trace, self.step, self.want, self.got, self.got_snapshot, self.before)

    def render(self) -> str:
        where = "building the store" if self.step < 0 else f"step {self.step + 1} of {len(self.trace.ops)}"
        rows = [f"divergence at {where}:"]
        rows.append(
            f"  store(max_bytes={self.trace.max_bytes}, object_nbytes={self.trace.object_nbytes}, "
            f"profile={self.trace.profile})"
        )
        for index, op in enumerate(self.trace.ops[: self.step + 1]):
            mark = ">>" if index == self.step else "  "
            rows.append(f"{mark} {index + 1:>3}. {describe(op)}")
        rows.append(f"  expected: {self.expected}")
        rows.append(f"  actual:   {self.actual}")
        return "\n".join(rows)


@dataclass(frozen=True)
class Mismatch:
    """How one step differs: as shown to people, and what the target did."""

    expected: str
    actual: str
    got: Outcome | None = None
    got_snapshot: Snapshot | None = None


class DivergenceFound(AssertionError):
    """A driver found a divergence and stops: the message shows it (the
    harnesses' finding, the Hypothesis machine's failure)."""


def construct(factory: Callable[[Any, Any], Any], trace: Trace) -> tuple[Any, Outcome]:
    """Build the store ``trace`` starts from: the store (or None) and the outcome."""
    try:
        return factory(trace.max_bytes, trace.object_nbytes), Ok()
    except Exception as error:
        kind = binding.classify("new", error)
        if kind is None:
            raise
        return None, Err(kind)


def apply(store: Any, op: Op) -> Outcome:
    """Run ``op`` on ``store``; the outcome is the value or the error kind.

    An exception that no kind stands for propagates, and so does an
    ``AssertionError`` for an error without a message: both are divergences
    the caller reports with their traceback.
    """
    try:
        return Ok(invoke(store, op))
    except Exception as error:
        kind = binding.classify(op.name, error)
        if kind is None:
            raise
        if not str(error):
            raise AssertionError(f"{op.name} raised {type(error).__name__} with no message") from error
        return Err(kind)


def show(outcome: Outcome, snapshot: Snapshot | None) -> str:
    text = str(traces.outcome_to_json(outcome))
    if snapshot is not None:
        keys = [k for k, _ in snapshot.entries]
        text += f"; stored {keys}, refs {dict(snapshot.references)}"
    return text


CHECK_EVERY = 16  # the cheap mode's whole-state checks: after every this many ops, and the last


def compare(
    trace: Trace, target: Target, on_state: Callable[[State], None] | None = None, every: int = 1
) -> Divergence | None:
    """Run ``trace`` on the spec and on ``target``; the first disagreement.
    ``on_state`` sees each state the spec goes through (a scope report).

    ``every=1`` (precise): after every op, the outcome, the whole observable
    state, the target's ``check_invariants()`` and the model's invariant.
    ``every=k > 1`` (cheap, the fuzzers' hot loop): after every op only the
    outcome; the rest after every ``k``-th op and the last. When the cheap run
    finds anything it is thrown away and the trace is replayed precisely, so
    the divergence reported names the first op at which anything differs.
    A target that diverged in the cheap run but not in the replay is
    reported as the cheap run saw it, saying so (it is not deterministic).
    """
    if every <= 1:
        return _run(trace, target, on_state, 1)
    try:
        coarse = _run(trace, target, None, every)
    except AssertionError:  # the model's invariant, at a checkpoint: name the op
        precise = _run(trace, target, on_state, 1)
        if precise is not None:
            return precise
        raise
    if coarse is None:
        return None
    precise = _run(trace, target, on_state, 1)
    if precise is not None:
        return precise
    note = " (the replay checking every op did not diverge: the target does not repeat itself)"
    return replace(coarse, actual=coarse.actual + note)


def _run(trace: Trace, target: Target, on_state: Callable[[State], None] | None, every: int) -> Divergence | None:
    built = initial_state(trace)
    want_new: Outcome = built if isinstance(built, Err) else Ok()
    try:
        store, got_new = construct(target.factory, trace)
    except PortBroken as error:
        if error.at_start:
            raise
        return Divergence(trace, -1, str(traces.outcome_to_json(want_new)), f"the port broke: {error}", want_new)
    except Exception as error:
        shown = f"constructor raised {_exception_line(error)}"
        return Divergence(trace, -1, str(traces.outcome_to_json(want_new)), shown, want_new)
    if got_new != want_new:
        return Divergence(
            trace, -1, str(traces.outcome_to_json(want_new)), str(traces.outcome_to_json(got_new)), want_new, got_new
        )
    if store is None:
        return None
    try:
        wrong = _wrong_geometry(store, trace)
        if wrong:
            return Divergence(trace, -1, "the store's sizes are the spec's", wrong, want_new)
        checker = getattr(store, "check_invariants", None)  # ports may offer it (auxstore does)
        assert isinstance(built, State)  # the store was built, as the spec says
        last = len(trace.ops) - 1
        for index, (before, after, want) in enumerate(spec_steps(trace, built, every)):
            if on_state is not None:
                on_state(after)
            if every == 1 or index == last or index % every == every - 1:
                found = check_step(store, trace.ops[index], want, observe(after), target, checker, trace.profile)
            else:
                found = check_step(store, trace.ops[index], want, None, target, None, trace.profile)
            if found is not None:
                return Divergence(
                    trace, index, found.expected, found.actual, want, found.got, found.got_snapshot, before
                )
        try:
            repr(store)  # whatever state the trace left it in
        except Exception as error:
            last = len(trace.ops) - 1
            return Divergence(trace, last, "repr(store) works", f"repr raised {_exception_line(error)}")
        return None
    finally:
        with contextlib.suppress(Exception):  # the trace may have closed it, or shown a failure
            store.close()


def check_step(
    store: Any,
    op: Op,
    want: Outcome,
    want_snapshot: Snapshot | None,
    target: Target,
    checker: Callable[[], None] | None,
    profile: str = "strict",
) -> Mismatch | None:
    """One op on ``store`` against the spec's outcome and snapshot: None when
    they agree, else how they differ. ``want_snapshot`` None: the outcome
    only (the cheap mode's op between checkpoints)."""
    try:
        got = apply(store, op)
    except PortBroken as error:  # it crashed, hung or answered garbage: a counterexample
        return Mismatch(show(want, None), f"the port broke: {error}")
    except Exception as error:
        return Mismatch(show(want, None), f"unexpected {_exception_line(error)}")
    if want_snapshot is None:
        return None if got == want else Mismatch(show(want, None), show(got, None), got)
    broken = _broken_invariant(checker)
    if broken:
        return Mismatch("the target's invariants hold", broken, got)
    try:
        got_snapshot = target.observe(store) if target.observe else None
    except PortBroken as error:
        return Mismatch(show(want, None), f"the port broke on snapshot: {error}", got)
    except Exception as error:  # a state the observer cannot even read is wrong
        return Mismatch(show(want, None), f"snapshot failed: {_exception_line(error)}", got)
    if got != want:
        return Mismatch(show(want, want_snapshot if got_snapshot else None), show(got, got_snapshot), got, got_snapshot)
    # Equal as given is equal in every form (the cheap test first: the fuzzers run it per op).
    if got_snapshot is not None and tuple(got_snapshot) != tuple(want_snapshot):
        exact = target.exact_order or profile != "strict"
        if exact or observed(got_snapshot) != observed(want_snapshot):
            return Mismatch(show(want, want_snapshot), show(got, got_snapshot), got, got_snapshot)
    return None


def _wrong_geometry(store: Any, trace: Trace) -> str | None:
    """What differs between the sizes a new store reports (those of
    ``object_nbytes``, ``capacity`` and vLLM's ``num_slots`` it has) and the spec's."""
    nbytes, max_bytes = binding.as_size(trace.object_nbytes), binding.as_size(trace.max_bytes)
    assert isinstance(nbytes, int) and isinstance(max_bytes, int)  # the store was built
    expected = {"object_nbytes": nbytes, "capacity": max_bytes // nbytes, "num_slots": max_bytes // nbytes}
    for name, want in expected.items():
        got = getattr(store, name, want)
        if got != want:
            return f"{name} is {got!r}, the spec says {want}"
    return None


def _broken_invariant(checker: Callable[[], None] | None) -> str | None:
    """What the target's ``check_invariants()`` (if it has one) raised."""
    if checker is None:
        return None
    try:
        checker()
    except Exception as error:
        return f"check_invariants() failed: {_exception_line(error)}"
    return None


def _exception_line(error: BaseException) -> str:
    return "".join(traceback.format_exception_only(type(error), error)).strip()
