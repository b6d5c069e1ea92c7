"""The one differential check: a trace on the spec and on a target, op by op.

Every driver (``verify``, vector replay, the Hypothesis machine, the fuzz
harnesses, the background driver's sequential part) judges a target with
``compare`` or ``check_step`` and reports a ``Divergence``.
"""

from __future__ import annotations

import contextlib
import os
import traceback
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from auxspec.engine import traces
from auxspec.engine.calls import OddReturn
from auxspec.engine.deviations import deviation
from auxspec.engine.expect import initial_state, spec_steps
from auxspec.engine.observable import as_snapshot, observed
from auxspec.engine.ops import Op, Trace, numbered, runs
from auxspec.engine.table import describe, invoke
from auxspec.engine.target import Errors, NotRunnable, PortBroken, Target, needs_memory
from auxspec.models import sequential as model
from auxspec.models.sequential import Err, Kind, Ok, Outcome, State
from auxspec.reference import binding
from auxspec.reference.store import Snapshot, observe

# The error kind an exception stands for in an operation, or None (binding.classify's signature).
Classify = Callable[[str, BaseException], Kind | None]


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
    want_snapshot: Snapshot | None = None  # the spec's state after the step, when the target's was compared
    compared: bool = False  # the outcomes (and states) were compared: shown side by side
    steps: int | None = None  # the whole trace's length, when ``trace`` holds only the ops up to ``step`` (streamed)

    @property
    def op(self) -> Op | None:
        return self.trace.ops[self.step] if self.step >= 0 else None

    @property
    def length(self) -> int:
        """How many ops the whole trace has."""
        return len(self.trace.ops) if self.steps is None else self.steps

    @property
    def deviation(self) -> str | None:
        """The documented strict-vs-vLLM deviation this is exactly, if any:
        the op, the spec's outcome, the target's outcome and (where the
        deviation says how the state changes) the target's state must all be
        the deviation's (see ``engine.deviations``)."""
        if self.trace.profile != "strict":
            return None
        return deviation(self.trace, self.step, self.want, self.got, self.got_snapshot, self.before)

    def render(self, last: int | None = None) -> str:
        """The trace up to the diverging step, then the spec's side and the
        target's side by side, each differing field marked ``*``; a payload
        that differs is shown by its length, the first differing offset and
        a short hex window around it (so objects of any size stay readable).
        ``last``: only the last that many ops (a long machine-made trace)."""
        where = "building the store" if self.step < 0 else f"step {self.step + 1} of {self.length}"
        rows = [f"divergence at {where}:"]
        rows.append(
            f"  store(max_bytes={self.trace.max_bytes}, object_nbytes={self.trace.object_nbytes}, "
            f"profile={self.trace.profile})"
        )
        # A call made many times in a row is one row, "× N" (as its vector writes it once with "times").
        before = runs(self.trace.ops, 0, max(self.step, 0)) if self.step >= 0 else []
        shown = before if last is None else before[max(0, len(before) - (last - 1)) :]
        if len(shown) < len(before):
            rows.append(f"     ... {shown[0][0] if shown else self.step} ops before not shown")
        for index, op, count in shown:
            times = f" × {count:,}" if count > 1 else ""
            rows.append(f"   {numbered(index, count):>3}. {describe(op)}{times}")
        if 0 <= self.step < len(self.trace.ops):
            rows.append(f">> {self.step + 1:>3}. {describe(self.trace.ops[self.step])}")
        if self.compared and self.want is not None and self.got is not None:
            rows.extend(side_by_side(self))
        else:
            rows.append(f"  expected: {self.expected}")
            rows.append(f"  actual:   {self.actual}")
        return "\n".join(rows)

    def summary_json(self) -> dict[str, Any]:
        """The divergence without the trace's ops or any payload (a trace of
        gigabytes): the step, the call, both sides in words, what differs and
        where the first differing payload differs."""
        body: dict[str, Any] = {
            "step": self.step + 1,
            "steps": self.length,
            "call": describe(self.op) if self.op is not None else "building the store",
            "expected": self.expected,
            "actual": self.actual,
            "differs": [row.name for row in _rows(self) if row.differs] if self.compared else ["outcome"],
        }
        if self.compared:
            first = _payload_difference(self)
            if first is not None:
                body["payload"] = first
        return body

    def as_json(self) -> dict[str, Any]:
        """The divergence with structured values (JSON types, no repr
        strings); ``step`` is 1-based as in the text (0: building the store).
        ``spec/auxspec/schemas/verify-report.schema.json`` describes it.
        Long payloads and values are in parts, as a vector file holds them."""
        compact = traces.Compact(self.trace.ops[: self.step + 1])
        body: dict[str, Any] = {
            "step": self.step + 1,
            "steps": self.length,
            "store": {
                "max_bytes": _json_scalar(self.trace.max_bytes),
                "object_nbytes": _json_scalar(self.trace.object_nbytes),
                "profile": self.trace.profile,
            },
            "ops": [
                {"step": number, "call": describe(op), "op": traces.op_to_json(op, compact)}
                for number, op in enumerate(self.trace.ops[: self.step + 1], start=1)
            ],
            "expected": _side_json(self.want, self.want_snapshot, self.expected, self.compared, compact),
            "actual": _side_json(self.got, self.got_snapshot, self.actual, self.compared, compact),
            "differs": [row.name for row in _rows(self) if row.differs] if self.compared else ["outcome"],
        }
        if self.compared:
            first = _payload_difference(self)
            if first is not None:
                body["payload"] = first
        return body


@dataclass(frozen=True)
class Mismatch:
    """How one step differs: as shown to people, and what the target did."""

    expected: str
    actual: str
    got: Outcome | None = None
    got_snapshot: Snapshot | None = None
    want_snapshot: Snapshot | None = None  # the spec's state after the step, when the target's is compared
    compared: bool = False  # a difference of values (not a failure to produce one)

    def at(self, trace: Trace, index: int, want: Outcome, before: State | None) -> Divergence:
        """The divergence this mismatch makes at op ``index`` of ``trace``."""
        return Divergence(
            trace,
            index,
            self.expected,
            self.actual,
            want,
            self.got,
            self.got_snapshot,
            before,
            self.want_snapshot,
            self.compared,
        )


class DivergenceFound(AssertionError):
    """A driver found a divergence and stops: the message shows it (the
    harnesses' finding, the Hypothesis machine's failure)."""


def construct(
    factory: Callable[[Any, Any], Any], trace: Trace, errors: Errors = (), classify: Classify | None = None
) -> tuple[Any, Outcome]:
    """Build the store ``trace`` starts from: the store (or None) and the outcome."""
    try:
        return factory(trace.max_bytes, trace.object_nbytes), Ok()
    except Exception as error:
        kind = _kind("new", error, errors, classify)
        if kind is None:
            raise
        return None, Err(kind)


def apply(
    store: Any,
    op: Op,
    errors: Errors = (),
    classify: Classify | None = None,
    call: Callable[[Any, Op], Any] | None = None,
) -> Outcome:
    """Run ``op`` on ``store``; the outcome is the value or the error kind
    (``errors``: a port's own exception classes and their kinds, tried first;
    then ``classify``, by default ``binding.classify``: a profile whose
    documented errors are narrower passes its own; ``call``: how the call is
    made, ``engine.table.invoke`` unless a target wraps it).

    An exception that no kind stands for propagates, and so does an
    ``AssertionError`` for an error without a message: both are divergences
    the caller reports with their traceback. A value no caller could use
    (``engine.calls.OddReturn``) propagates too.
    """
    try:
        return Ok((call or invoke)(store, op))
    except OddReturn:
        raise
    except Exception as error:
        kind = _kind(op.name, error, errors, classify)
        if kind is None:
            raise
        if not str(error):
            raise AssertionError(f"{op.name} raised {type(error).__name__} with no message") from error
        return Err(kind)


def _kind(op: str, error: BaseException, errors: Errors, classify: Classify | None = None) -> Kind | None:
    for cls, kind in errors:
        if isinstance(error, cls):
            return kind
    return (classify or binding.classify)(op, error)


def show(outcome: Outcome, snapshot: Snapshot | None) -> str:
    """An outcome and a state in one line, payloads abbreviated (``show_bytes``)."""
    text = _outcome_text(outcome)
    if snapshot is not None:
        keys = [k for k, _ in snapshot.entries]
        text += f"; stored {keys}, refs {dict(snapshot.references)}"
    return text


# ----------------------------------------------------------------- rendering


WINDOW = 16  # bytes of hex shown around a payload's first difference
CELL = 44  # the widest a side's value is shown


def show_bytes(data: bytes) -> str:
    """Bytes for people: short ones in hex, long ones by length with their first bytes."""
    if len(data) <= 16:
        return data.hex() or "(empty)"
    if data == data[:1] * len(data):
        return f"{len(data)} bytes of {data[:1].hex()}"
    return f"{len(data)} bytes {data[:6].hex()}..."


def _outcome_text(outcome: Outcome) -> str:
    if isinstance(outcome, Err):
        return f"error {outcome.kind.value}"
    value = outcome.value
    if isinstance(value, bytes):
        return f"ok {show_bytes(value)}"
    return f"ok {value!r}"


@dataclass(frozen=True)
class _Row:
    name: str
    expected: str
    actual: str
    differs: bool  # the values, not their (abbreviated) texts


def _keys_text(keys: list[str], other: list[str]) -> str:
    text = repr(keys)
    if len(text) <= CELL:
        return text
    apart = next((i for i, (a, b) in enumerate(zip(keys, other, strict=False)) if a != b), min(len(keys), len(other)))
    if apart >= len(keys):
        return f"{len(keys)} keys, all as the other side's first"
    return f"{len(keys)} keys; #{apart + 1} is {keys[apart]!r}"


def _rows(divergence: Divergence) -> list[_Row]:
    """The fields of both sides: outcome, then (when both states are known)
    the stored keys in recency order, the payloads, the pins and closed."""
    assert divergence.want is not None and divergence.got is not None
    differs = divergence.want != divergence.got
    rows = [_Row("outcome", _outcome_text(divergence.want), _outcome_text(divergence.got), differs)]
    want, got = divergence.want_snapshot, divergence.got_snapshot
    if want is None or got is None:
        return rows
    want_keys, got_keys = [k for k, _ in want.entries], [k for k, _ in got.entries]
    shown_want, shown_got = _keys_text(want_keys, got_keys), _keys_text(got_keys, want_keys)
    if want_keys != got_keys and shown_want == shown_got:
        shown_got += " (order differs)"
    rows.append(_Row("stored", shown_want, shown_got, want_keys != got_keys))
    payloads = dict(got.entries)
    differing = [key for key, data in want.entries if key in payloads and payloads[key] != data]
    if differing:
        key = differing[0]
        name = f"payload {key!r}" + (f" (+{len(differing) - 1} more)" if len(differing) > 1 else "")
        rows.append(_Row(name, show_bytes(dict(want.entries)[key]), show_bytes(payloads[key]), True))
    want_pins, got_pins = dict(sorted(want.references)), dict(sorted(got.references))
    rows.append(_Row("pins", repr(want_pins), repr(got_pins), want_pins != got_pins))
    rows.append(_Row("closed", str(want.closed), str(got.closed), want.closed != got.closed))
    return rows


def _first_apart(a: bytes, b: bytes) -> int | None:
    if a == b:
        return None
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


def _hex_window(data: bytes, offset: int, start: int) -> str:
    """``data[start:start + WINDOW]`` in hex, the byte at ``offset`` in brackets."""
    cells = [f"{data[at]:02x}" for at in range(start, min(start + WINDOW, len(data)))]
    if offset >= len(data):
        cells.append("[end]")
    else:
        cells[offset - start] = f"[{cells[offset - start]}]"
    return " ".join(cells)


def _payload_pair(divergence: Divergence) -> tuple[str, bytes, bytes] | None:
    """The first pair of byte strings that differ: the outcome's value, else a stored payload."""
    want, got = divergence.want, divergence.got
    if isinstance(want, Ok) and isinstance(got, Ok):
        values = want.value, got.value
        if isinstance(values[0], bytes) and isinstance(values[1], bytes) and values[0] != values[1]:
            return "value", values[0], values[1]
    if divergence.want_snapshot is not None and divergence.got_snapshot is not None:
        payloads = dict(divergence.got_snapshot.entries)
        for key, data in divergence.want_snapshot.entries:
            if key in payloads and payloads[key] != data:
                return f"payload {key!r}", data, payloads[key]
    return None


def _payload_difference(divergence: Divergence) -> dict[str, Any] | None:
    """Where the first differing payload differs: lengths, the offset and,
    for a read of several objects, which object and byte that is."""
    pair = _payload_pair(divergence)
    if pair is None:
        return None
    what, want, got = pair
    offset = _first_apart(want, got)
    assert offset is not None
    found: dict[str, Any] = {"of": what, "expected_length": len(want), "actual_length": len(got), "offset": offset}
    size = divergence.trace.object_nbytes
    keys = getattr(divergence.op, "keys", None)
    if what == "value" and isinstance(size, int) and size > 0 and isinstance(keys, tuple) and keys:
        index = offset // size
        if index < len(keys):
            found.update(object=index + 1, key=keys[index], byte=offset % size)
    start = max(0, offset - WINDOW // 2)
    found["window_start"] = start
    found["expected_hex"] = want[start : start + WINDOW].hex()
    found["actual_hex"] = got[start : start + WINDOW].hex()
    return found


def side_by_side(divergence: Divergence) -> list[str]:
    """The spec's side and the target's, a row per field, differing rows
    marked ``*``; then where the first differing payload differs."""
    rows = _rows(divergence)
    left = min(CELL, max(len("expected (spec)"), *(len(row.expected) for row in rows)))
    name = max(len(row.name) for row in rows)
    lines = [f"    {'':<{name}}  {'expected (spec)':<{left}}  actual (target)"]
    for row in rows:
        mark = "*" if row.differs else " "
        lines.append(f"  {mark} {row.name:<{name}}  {row.expected:<{left}}  {row.actual}")
    found = _payload_difference(divergence)
    if found is not None:
        where = f"offset {found['offset']}"
        if "object" in found:
            where += f" (object {found['object']}, key {found['key']!r}, byte {found['byte']})"
        lengths = f"{found['expected_length']} vs {found['actual_length']} bytes"
        lines.append(f"  {found['of']} ({lengths}) first differs at {where}:")
        pair = _payload_pair(divergence)
        assert pair is not None
        start = found["window_start"]
        for label, data in (("expected", pair[1]), ("actual", pair[2])):
            lines.append(f"    {label:<8} @{start:<6} {_hex_window(data, found['offset'], start)}")
    return lines


def _json_scalar(value: Any) -> Any:
    """A size as JSON: ints, floats, strings, bools and null as they are, anything else by its type."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return {"type": type(value).__name__}


def _side_json(
    outcome: Outcome | None, snapshot: Snapshot | None, text: str, compared: bool, compact: traces.Compact | None = None
) -> dict[str, Any]:
    """One side of a divergence: the outcome (as in a vector file) and the
    state; where the difference is not one of values (an exception of no
    kind, a broken port or invariant, an odd return), what happened in words."""
    if outcome is None:
        return {"outcome": None, "text": text}
    side: dict[str, Any] = {"outcome": traces.outcome_to_json(outcome, compact)}
    if not compared:
        side["text"] = text
    if snapshot is not None:
        side["state"] = {
            "stored": [key for key, _ in snapshot.entries],
            "sizes": {key: len(data) for key, data in snapshot.entries},
            "pins": dict(sorted(snapshot.references)),
            "closed": snapshot.closed,
        }
    return side


CHECK_EVERY = 16  # the cheap mode's whole-state checks: after every this many ops, and the last


def compare(
    trace: Trace,
    target: Target,
    on_state: Callable[[State], None] | None = None,
    every: int = 1,
    replay: bool = True,
    semantics: Any = None,
    exact_from: int | None = None,
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
    ``replay=False``: no replay, the cheap run's divergence as it is (the
    large-store phase, where a snapshot per op would copy gigabytes; an
    outcome that differs is still named at its op, a state that differs at
    the checkpoint after it).
    ``semantics``: the spec's steps, the model unless a checked stand-in is
    given (the depth phase's ``models.incremental``, with ``replay=False``).
    ``exact_from``: with ``replay=False``, the whole state is also compared
    after every op from this index on (a deep trace's last stretch, so its
    divergence is named at the op where the state first differs).
    """
    if every <= 1:
        return _run(trace, target, on_state, 1, semantics=semantics)
    if not replay:
        return _run(trace, target, on_state, every, semantics=semantics, exact_from=exact_from)
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


def observed_steps(count: int, every: int, exact: int | None = None) -> Callable[[int], bool]:
    """After which ops of a trace of ``count`` ops ``compare(every=every)``
    observes the whole state: every ``every``-th op, the last one, and every
    op from ``exact`` on (``_run``'s ``exact_from``)."""
    last, exact = count - 1, count if exact is None else exact
    return lambda i: every <= 1 or i == last or i % every == every - 1 or i >= exact


def compare_stream(
    head: Trace, ops: Iterable[Op], target: Target, prefix: Callable[[int], tuple[Op, ...]], steps: int
) -> Divergence | None:
    """``compare`` (precise) of a trace whose ``steps`` ops are read one at a
    time from ``ops`` rather than held (a long vector file): memory does not
    grow with the trace. ``head`` has its profile and sizes (its ops are not
    used). The divergence, if any, holds the ops up to the diverging one,
    read again with ``prefix(count)``: it names that op with the trace up to
    it, as ``compare``'s does."""
    stream = iter(ops)
    try:
        found = _run(head, target, None, 1, stream)
    finally:
        close = getattr(stream, "close", None)  # a generator over an open file: close it now
        if close is not None:
            close()
    if found is None:
        return None
    return replace(found, trace=replace(head, ops=prefix(found.step + 1)), steps=steps)


def _run(
    trace: Trace,
    target: Target,
    on_state: Callable[[State], None] | None,
    every: int,
    ops: Iterator[Op] | None = None,
    semantics: Any = None,
    exact_from: int | None = None,
) -> Divergence | None:
    """The one compare loop, over ``trace.ops`` or (``every=1``) the ops
    ``ops`` streams: the ops are not indexed, so a streamed trace is never held."""
    semantics = semantics or model
    built = initial_state(trace, semantics)
    want_new: Outcome = built if isinstance(built, Err) else Ok()
    observes = observed_steps(len(trace.ops), every, exact_from)  # the state is compared after these ops
    factory = target.factory
    if target.ahead is not None and ops is None and not isinstance(built, Err):  # a held trace, a store built
        factory = target.ahead(trace.ops, observes)
    try:
        store, got_new = construct(factory, trace, target.errors)
    except (MemoryError, NotRunnable) as error:  # NotRunnable: a port process's "resources" answer
        short = error if isinstance(error, NotRunnable) else _not_runnable("the constructor", error, trace)
        if not needs_memory(trace):
            shown = f"constructor: unexpected {short.detail}"
            return Divergence(trace, -1, str(traces.outcome_to_json(want_new)), shown, want_new)
        short.trace = trace
        raise short from None
    except PortBroken as error:
        if error.at_start:
            raise
        return Divergence(trace, -1, str(traces.outcome_to_json(want_new)), f"the port broke: {error}", want_new)
    except Exception as error:
        shown = f"constructor raised {_exception_line(error)}"
        return Divergence(trace, -1, str(traces.outcome_to_json(want_new)), shown, want_new)
    if got_new != want_new:
        return Divergence(
            trace,
            -1,
            str(traces.outcome_to_json(want_new)),
            str(traces.outcome_to_json(got_new)),
            want_new,
            got_new,
            compared=True,
        )
    if store is None:
        return None
    try:
        wrong = _wrong_geometry(store, trace)
        if wrong:
            return Divergence(trace, -1, "the store's sizes are the spec's", wrong, want_new)
        checker = getattr(store, "check_invariants", None)  # ports may offer it (auxstore does)
        roomy = needs_memory(trace)
        assert not isinstance(built, Err)  # the store was built, as the spec says
        index = -1
        for index, (op, before, after, want) in enumerate(spec_steps(trace, built, every, ops, semantics)):
            if on_state is not None:
                on_state(after)
            if observes(index):
                found = check_step(store, op, want, observe(after), target, checker, trace.profile, roomy)
            else:
                found = check_step(store, op, want, None, target, None, trace.profile, roomy)
            if found is not None:
                return found.at(trace, index, want, before)
        try:
            repr(store)  # whatever state the trace left it in
        except Exception as error:
            return Divergence(trace, index, "repr(store) works", f"repr raised {_exception_line(error)}")
        return None
    except NotRunnable as error:
        if error.trace is None:
            error.trace = trace
        raise
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
    roomy: bool = False,
) -> Mismatch | None:
    """One op on ``store`` against the spec's outcome and snapshot: None when
    they agree, else how they differ. ``want_snapshot`` None: the outcome
    only (the cheap mode's op between checkpoints). ``roomy``: the store may
    need more memory than this machine has (``target.needs_memory``), so a
    failure for memory raises ``NotRunnable``; otherwise it is a divergence."""
    try:
        got = apply(store, op, target.errors, call=target.invoke)
    except (MemoryError, NotRunnable) as error:  # NotRunnable: a port process's "resources" answer
        short = error if isinstance(error, NotRunnable) else _not_runnable(op.name, error, None)
        if roomy:  # no outcome of the spec's: this machine cannot run it
            raise short from None
        return Mismatch(show(want, None), f"unexpected {short.detail}")  # a small store: a bug
    except PortBroken as error:  # it crashed, hung or answered garbage: a counterexample
        return Mismatch(show(want, None), f"the port broke: {error}")
    except OddReturn as error:
        return Mismatch(show(want, None), str(error))
    except Exception as error:
        if raised_by_verifier(error):
            raise  # verify's own failure: reported as verify's, never as the port's divergence
        return Mismatch(show(want, None), f"unexpected {_exception_line(error)}")
    if want_snapshot is None:
        return None if got == want else Mismatch(show(want, None), show(got, None), got)
    broken = _broken_invariant(checker)
    if broken:
        return Mismatch("the target's invariants hold", broken, got)
    try:
        seen = target.observe(store) if target.observe else None
        got_snapshot = None if seen is None else as_snapshot(seen)
    except PortBroken as error:
        return Mismatch(show(want, None), f"the port broke on snapshot: {error}", got)
    except OddReturn as error:
        return Mismatch(show(want, None), str(error), got)
    except Exception as error:  # a state the observer cannot even read is wrong
        return Mismatch(show(want, None), f"snapshot failed: {_exception_line(error)}", got)
    if got != want:
        return Mismatch(
            show(want, want_snapshot if got_snapshot else None),
            show(got, got_snapshot),
            got,
            got_snapshot,
            want_snapshot if got_snapshot else None,
            compared=True,
        )
    # Equal as given is equal in every form (the cheap test first: the fuzzers run it per op).
    if got_snapshot is not None and tuple(got_snapshot) != tuple(want_snapshot):
        exact = target.exact_order or profile != "strict"
        if exact or observed(got_snapshot) != observed(want_snapshot):
            return Mismatch(
                show(want, want_snapshot), show(got, got_snapshot), got, got_snapshot, want_snapshot, compared=True
            )
    return None


# The spec's own code: an assertion failing here is a bug of verify, not of the port.
_VERIFIER = tuple(str(Path(__file__).resolve().parents[1] / part) + os.sep for part in ("engine", "drivers", "models"))


def _not_runnable(call: str, error: MemoryError, trace: Trace | None) -> NotRunnable:
    found = NotRunnable(f"{call} raised {_exception_line(error)}", _exception_line(error))
    found.trace = trace
    return found


def raised_by_verifier(error: BaseException) -> bool:
    """Whether ``error`` is one of the verifier's own assertions: a plain
    ``AssertionError`` raised (deepest frame) in the engine, the drivers or
    the model, caused by nothing the target raised. A port's own
    assertion is raised in the port's code, and ``apply``'s assertion about
    a port's error without a message has that error as its cause."""
    if type(error) is not AssertionError or error.__cause__ is not None or error.__traceback__ is None:
        return False
    deepest = traceback.extract_tb(error.__traceback__)[-1].filename
    return os.path.abspath(deepest).startswith(_VERIFIER)


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
