"""Judge a store against the ``remote`` profile (auxspec.models.remote).

The profile is nondeterministic (an engine may evict anything between two
calls), so a store is not compared with one expected outcome: each call's
observed outcome must be one the model allows, and the model then follows
the branch it observed. The traces are the op alphabet's own
(``engine.codec.decode`` of seeded bytes, ``strict`` inputs, the ops the
target offers), each op run through its table row (``engine.table``): its
call on the store, and its step on the remote model, whose functions have
the sequential model's names. Two things are left out of the alphabet: the
observations ``len``, ``stats``, ``flush`` and ``with`` (no client of a
shared engine can count what it holds; the store has nothing to flush), and
the call forms that call back into the store from inside a call (the profile
defines no call from inside a call), which run in the plain ``iter`` form
instead. ``key in store`` is judged (the profile's
``contains``): a Python store is driven with it always (it is part of the
API a remote store keeps), a port process when it declares the observations;
each observation the profile does not define (``len``, ``stats``, ``flush``,
``with``) is decoded as ``in`` of the key the call before it named.

Only the errors the profile documents are outcomes (``classify``): a read
fails with ``MissingKeyError``, a put with ``CapacityError``, as section 13
says; any other ``BlockObjectStoreError`` is no outcome the profile allows.
An ``EngineError`` (the engine failed: unreachable, timed out, a result code
the profile does not name) is neither an outcome nor a divergence: the judge
raises ``EngineFailure`` and the run says it, without a verdict.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields, replace
from typing import Any, cast

from auxspec.drivers.remote_engines import OPTIONS, Evictor, judged_with
from auxspec.engine.codec import decode
from auxspec.engine.compare import apply, construct
from auxspec.engine.ops import (
    OBSERVE,
    PYTHON,
    READ_INTO,
    REENTRANT_FORMS,
    Contains,
    Features,
    KeyValue,
    Op,
    Trace,
)
from auxspec.engine.table import describe, kind_of
from auxspec.engine.target import Target
from auxspec.models import remote
from auxspec.models.sequential import Err, Kind, Ok, Outcome
from auxspec.reference import binding

# The ops a remote target may be driven with (beyond put, get and close); of
# the observations (OBSERVE), only ``contains`` is the profile's.
REMOTE_FEATURES: Features = frozenset({PYTHON, READ_INTO, OBSERVE})
REMOTE_OPS = frozenset({"put", "get", "read_into", "close", "contains"})
# The observations the profile does not define: each becomes ``in`` of the
# key the call before it named, so ``in`` comes as often as the others would.
OBSERVATIONS = frozenset({"len", "stats", "flush", "enter", "exit"})
TRACE_BYTES = 96  # random bytes decoded into one trace
# The error classes (by name, as binding.is_store_error finds them, so a
# port's own classes count) each operation may fail with under the profile.
DOCUMENTED = {"get": "MissingKeyError", "read_into": "MissingKeyError", "put": "CapacityError"}
ENGINE_ERROR = "EngineError"


class EngineFailure(Exception):
    """The store reported that its engine failed (an ``EngineError``): no
    outcome of the profile, and no verdict on the store either."""

    def __init__(self, trace: Trace, index: int, message: str) -> None:
        self.trace, self.index, self.message = trace, index, message
        call = "building the store" if index < 0 else describe(trace.ops[index])
        super().__init__(f"{call}: {message}")


def _named(error: BaseException, name: str) -> bool:
    return any(cls.__name__ == name for cls in type(error).__mro__)


def classify(op: str, error: BaseException) -> Kind | None:
    """The kind ``error`` stands for under the remote profile (compare.Classify):
    binding.classify's, but a store error only as the class section 13
    documents for ``op`` (a put's ``KeyError`` stays ``strict``'s
    unreferenced release, which the profile never allows)."""
    if binding.is_store_error(error) and not (op == "put" and isinstance(error, KeyError)):
        wanted = DOCUMENTED.get(op)
        if wanted is None or not _named(error, wanted):
            return None
    return binding.classify(op, error)


def remote_features(features: Features) -> Features:
    """What a target offering ``features`` is driven with: a Python store also with ``in``."""
    return (features | ({OBSERVE} if PYTHON in features else set())) & REMOTE_FEATURES


@dataclass(frozen=True)
class Violation:
    """An outcome the profile does not allow: the trace up to it, and what was allowed."""

    trace: Trace
    index: int  # of the op in trace.ops; -1 for the constructor
    observed: str
    allowed: tuple[Outcome, ...]
    seen: tuple[Outcome, ...] = ()  # the outcomes of the calls before it, each one allowed
    deletions: int | None = None  # the seed of verify's deletions between calls (remote_engines.Evictor), if any

    def render(self) -> str:
        lines = [f"store({self.trace.max_bytes!r}, {self.trace.object_nbytes!r})"]
        for number, op in enumerate(self.trace.ops[: self.index + 1]):
            returned = f" -> {_show(self.seen[number])}" if number < len(self.seen) else ""
            lines.append(f"  {describe(op)}{returned}")
        shown = ", ".join(_show(outcome) for outcome in self.allowed)
        lines.append(f"the last call gave {self.observed}; the remote profile allows only: {shown}")
        return "\n".join(lines)


@dataclass
class Tally:
    """What a judged run saw of the engine."""

    traces: int = 0
    calls: int = 0
    puts_refused: int = 0  # puts that failed for room (CAPACITY), changing nothing
    reads_of_gone: int = 0  # reads that failed MISSING though every key had been put: the engine evicted
    read_hits: int = 0  # reads of at least one key that returned every object
    outcomes: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Report:
    target: str
    seed: int
    tally: Tally
    violation: Violation | None
    seconds: float
    ended_by: str = "count"  # what ended the search: "count", "time", "found" or "engine failure"
    engine_failure: EngineFailure | None = None  # what ended it, when the engine failed

    @property
    def vacuous(self) -> bool:
        """Every put refused and every read failed is allowed (an engine may
        evict everything at once), and so is an engine that cannot be reached:
        a run in which no read returned an object says nothing of the store."""
        return self.tally.read_hits == 0

    def render(self) -> str:
        t = self.tally
        head = (
            f"{self.target}, remote profile, seed {self.seed}: {t.traces} traces, {t.calls} calls in "
            f"{self.seconds:.1f} s; {t.read_hits} reads returned every object, {t.reads_of_gone} reads met an "
            f"eviction, {t.puts_refused} puts were refused for room"
        )
        if self.engine_failure is not None:
            return head + f"\nNOT JUDGED: the engine failed at trace {t.traces}, {self.engine_failure}"
        if self.violation is None and self.vacuous:
            return head + "\nNOTHING JUDGED: no read returned an object (is the engine reachable?)"
        if self.violation is None:
            return head + "\nconforms: every outcome was one the remote profile allows"
        return head + "\nDOES NOT CONFORM:\n" + self.violation.render()


def remote_trace(data: bytes, features: Features = REMOTE_FEATURES) -> Trace:
    """The trace ``data`` decodes to under ``strict``, limited to what the
    remote profile defines (see the module's docstring)."""
    trace = decode(data, "strict", remote_features(features))
    ops: list[Op] = []
    for op in trace.ops:
        if op.name in REMOTE_OPS:
            ops.append(_plain(op))
            continue
        key = _last_key(ops)  # an observation the profile does not define: ``in`` takes its place
        if op.name in OBSERVATIONS and key is not None:
            ops.append(Contains(key))
    return replace(trace, ops=tuple(ops))


def _last_key(ops: list[Op]) -> KeyValue | None:
    """The first key the latest call naming keys named (None if none did)."""
    for op in reversed(ops):
        keys: Any = getattr(op, "keys", None) or getattr(op, "objects", None)  # a read's keys, a put's objects
        if isinstance(keys, tuple):
            for item in keys:
                key = item[0] if isinstance(item, tuple) else item
                if isinstance(key, (str, int)):
                    return key
    return None


def _plain(op: Op) -> Op:
    names = {f.name for f in fields(cast(Any, op))}
    if "form" in names and getattr(op, "form") in REENTRANT_FORMS:  # noqa: B009
        return cast(Op, replace(cast(Any, op), form="iter"))
    return op


def judge(
    trace: Trace, target: Target, tally: Tally | None = None, between: Callable[[], None] | None = None
) -> Violation | None:
    """Run ``trace`` on a fresh store of ``target``; the first outcome the
    profile does not allow, or None. The store is closed at the end.
    ``between`` runs before each call (an engine evicting, ``Evictor.strike``)."""
    tally = tally if tally is not None else Tally()
    tally.traces += 1
    expected_new = remote.new(binding.as_size(trace.max_bytes), binding.as_size(trace.object_nbytes))
    want = expected_new if isinstance(expected_new, Err) else Ok()
    try:
        store, built = construct(target.factory, trace, target.errors, classify)
    except Exception as error:  # no error kind stands for it
        if _named(error, ENGINE_ERROR):
            raise EngineFailure(trace, -1, f"{type(error).__name__}: {error}") from error
        return Violation(trace, -1, f"{type(error).__name__}: {error}", (want,))
    if built != want:
        _close(store)
        return Violation(trace, -1, _show(built), (want,))
    if not isinstance(expected_new, remote.State):
        return None
    state: remote.State = expected_new
    seen: list[Outcome] = []
    try:
        for index, op in enumerate(trace.ops):
            allowed = cast(remote.Allowed, kind_of(op).step(remote, cast(Any, state), op))
            if between is not None:
                between()
            try:
                observed = apply(store, op, target.errors, classify)
            except Exception as error:  # no error kind stands for it: not an outcome the profile allows
                if _named(error, ENGINE_ERROR):
                    raise EngineFailure(trace, index, f"{type(error).__name__}: {error}") from error
                return Violation(trace, index, f"{type(error).__name__}: {error}", allowed.outcomes(), tuple(seen))
            tally.calls += 1
            name = _show(observed)
            called = f"{op.name} {observed.kind.value if isinstance(observed, Err) else 'ok'}"
            tally.outcomes[called] = tally.outcomes.get(called, 0) + 1
            after = allowed.after(observed)
            if after is None:
                return Violation(trace, index, name, allowed.outcomes(), tuple(seen))
            seen.append(observed)
            _count(tally, state, allowed, observed)
            state = after
    finally:
        _close(store)
    return None


def _count(tally: Tally, before: remote.State, allowed: remote.Allowed, observed: Outcome) -> None:
    if observed == Err(Kind.CAPACITY):
        tally.puts_refused += 1
    elif observed == Err(Kind.MISSING) and any(isinstance(o, Ok) for o in allowed.outcomes()):
        tally.reads_of_gone += 1  # every key may have been stored: the engine must have evicted one
    elif isinstance(observed, Ok) and isinstance(observed.value, bytes) and observed.value:
        tally.read_hits += 1


def _close(store: Any) -> None:
    if store is not None:
        with contextlib.suppress(Exception):  # a store that fails to close was judged on its calls already
            store.close()


def traces(seed: int, features: Features = REMOTE_FEATURES) -> Iterator[Trace]:
    """The endless, reproducible stream of traces of ``seed``."""
    source = random.Random(seed)
    while True:
        yield remote_trace(source.randbytes(TRACE_BYTES), features)


def search(
    target: Target, seed: int, *, max_traces: int = 300, max_seconds: float = 60.0, evictor: Evictor | None = None
) -> Report:
    """Judge ``target`` on the traces of ``seed`` until a violation, ``max_traces``
    or ``max_seconds``; with ``evictor``, keys are deleted between calls
    (each trace's deletions seeded by ``deletion_seed``)."""
    tally = Tally()
    start = time.monotonic()
    violation: Violation | None = None
    failure: EngineFailure | None = None
    ended_by = "count"
    for count, trace in enumerate(traces(seed, target.features)):
        if count >= max_traces:
            break
        if time.monotonic() - start > max_seconds:
            ended_by = "time"
            break
        try:
            violation = judge_evicting(trace, target, evictor, deletion_seed(seed, count), tally)
        except EngineFailure as error:
            failure, ended_by = error, "engine failure"
            break
        if violation is not None:
            ended_by = "found"
            break
    return Report(target.label, seed, tally, violation, time.monotonic() - start, ended_by, failure)


def deletion_seed(seed: int, trace_number: int) -> int:
    """The seed of verify's deletions during trace ``trace_number`` of ``seed``."""
    return seed * 1_000_003 + trace_number


def judge_evicting(
    trace: Trace, target: Target, evictor: Evictor | None, seed: int, tally: Tally | None = None
) -> Violation | None:
    """``judge``, with ``evictor`` (if any) deleting keys before each call, seeded by ``seed``."""
    if evictor is None:
        return judge(trace, target, tally)
    evictor.start(seed)
    try:
        found = judge(trace, target, tally, evictor.strike)
    finally:
        evictor.finish()
    return None if found is None else replace(found, deletions=seed)


def _show(outcome: Outcome) -> str:
    if isinstance(outcome, Err):
        return f"error {outcome.kind.value}"
    value = outcome.value
    if isinstance(value, bytes) and len(value) > 24:
        return f"Ok({value[:24]!r}... {len(value)} bytes)"
    return f"Ok({value!r})"


def main(argv: list[str] | None = None) -> int:
    """``python -m auxspec.drivers.remote [TARGET | --exec COMMAND] [--seed N]...``:
    judge a store against the remote profile; exit 1 on a violation, or when
    no read returned an object (nothing was judged)."""
    import argparse

    from auxspec.drivers.protocol import process_target
    from auxspec.engine.target import load_target

    parser = argparse.ArgumentParser(prog="python -m auxspec.drivers.remote", description=main.__doc__)
    parser.add_argument("target", nargs="?", help="module:Class or path/to/file.py:Class")
    parser.add_argument("--exec", dest="command", help="a port process speaking docs/protocol.md")
    parser.add_argument("--seed", type=int, action="append", help="repeatable (default: 1 2 3)")
    parser.add_argument("--max-traces", type=int, default=300, help="per seed (default 300)")
    parser.add_argument("--max-seconds", type=float, default=60.0, help="per seed (default 60)")
    parser.add_argument(
        "--option",
        action="append",
        choices=sorted(OPTIONS),
        help="a model option (repeatable; semantics.md 13.1): Mooncake Store needs partial_puts and transient_misses",
    )
    args = parser.parse_args(argv)
    if (args.target is None) == (args.command is None):
        parser.error("name a TARGET or an --exec COMMAND")
    process = process_target(args.command) if args.command else None
    target = process.target if process is not None else load_target(args.target)
    failed = False
    try:
        for seed in args.seed or [1, 2, 3]:
            with judged_with(tuple(args.option or ())):
                report = search(target, seed, max_traces=args.max_traces, max_seconds=args.max_seconds)
            print(report.render(), flush=True)
            failed = failed or report.violation is not None or report.vacuous or report.engine_failure is not None
    finally:
        if process is not None:
            process.close()
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
