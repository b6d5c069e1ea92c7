"""Shrink a counterexample to one a port author can act on.

Whatever phase found it, a counterexample is made smaller the same way:
first fewer ops (runs of ops cut, longest runs first; neighbouring ops of a
kind made one, their key lists and batches joined), then simpler ops
(shorter key lists and batches, plain call forms and buffers), then fewer
distinct keys, then payload bytes, then a smaller store. A background
scenario is shrunk the same way, its writer schedule with it (fewer and
smaller releases, no injected fault, a close rather than a drop, a shorter
queue). A candidate is kept when it still fails; the search is budgeted by
a count of candidates tried, so the same counterexample shrinks the same
way on a fast or a slow machine, with a time cap only as a guard.

Every field is reached through the op table's field kinds
(``engine.fields``), so an op added to the table is shrunk too.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any, Generic, TypeVar, cast

from auxspec.engine.fields import Batch, Form, Key, Keys, Shape
from auxspec.engine.ops import Bad, Op, Trace
from auxspec.engine.table import kind_of
from auxspec.generators.background import Release, Scenario, Step

TRIES = 600  # candidates tried at most: the budget that decides the result
SECONDS = 60.0  # a cap against a target so slow that the count would take all day

T = TypeVar("T")


@dataclass
class Shrunk(Generic[T]):
    """The smallest failing input found, how it fails, and how the search ended."""

    value: T
    failure: Any
    tries: int
    ended_by: str  # "fixpoint" (nothing smaller fails), "count" (TRIES), "time" (SECONDS), "skipped" (not tried)


class _Search(Generic[T]):
    """The greedy loop: keep the first candidate that still fails, start over from it."""

    def __init__(self, fails: Callable[[T], Any], tries: int, seconds: float) -> None:
        self.fails, self.most = fails, tries
        self.deadline = time.monotonic() + seconds
        self.tries = 0
        self.ended_by = "fixpoint"

    def out_of_budget(self) -> bool:
        if self.tries >= self.most:
            self.ended_by = "count"
        elif time.monotonic() > self.deadline:
            self.ended_by = "time"
        else:
            return False
        return True

    def first_failing(self, candidates: Iterator[T]) -> tuple[T, Any] | None:
        for candidate in candidates:
            if self.out_of_budget():
                return None
            self.tries += 1
            failure = self.fails(candidate)
            if failure is not None:
                return candidate, failure
        return None


# ------------------------------------------------------------- ops


def _without(values: tuple[Any, ...]) -> Iterator[tuple[Any, ...]]:
    for index in range(len(values)):
        yield values[:index] + values[index + 1 :]


def _with(op: Op, name: str, value: Any) -> Op:
    return cast(Op, replace(cast(Any, op), **{name: value}))


def simpler_ops(op: Op) -> Iterator[Op]:
    """``op`` made simpler in one field: an element of a key list or batch
    dropped, the plain call form, the plain buffer shape, zero payload bytes."""
    for f in kind_of(op).fields:
        value = getattr(op, f.name)
        if isinstance(f.kind, (Keys, Batch)) and isinstance(value, tuple):
            for fewer in _without(value):
                yield _with(op, f.name, fewer)
        if isinstance(f.kind, Form) and value != "list":
            yield _with(op, f.name, "list")
        if isinstance(f.kind, Shape) and value != "plain":
            yield _with(op, f.name, "plain")
        if isinstance(f.kind, Batch) and isinstance(value, tuple):
            for index, item in enumerate(value):
                if isinstance(item, tuple) and type(item[1]) is bytes and item[1].strip(b"\0"):
                    zeroed = (item[0], bytes(len(item[1])))
                    yield _with(op, f.name, (*value[:index], zeroed, *value[index + 1 :]))


def keys_of(op: Op) -> Iterator[object]:
    """The keys ``op`` names, in order (through the table's field kinds)."""
    for f in kind_of(op).fields:
        value = getattr(op, f.name)
        if isinstance(f.kind, Key):
            yield value
        elif isinstance(f.kind, Keys) and isinstance(value, tuple):
            yield from value
        elif isinstance(f.kind, Batch) and isinstance(value, tuple):
            yield from (item[0] for item in value if isinstance(item, tuple))


def renamed(op: Op, old: object, new: object) -> Op:
    """``op`` with every occurrence of key ``old`` made ``new``."""

    def one(key: Any) -> Any:
        return new if key == old and type(key) is type(old) else key

    changes: dict[str, Any] = {}
    for f in kind_of(op).fields:
        value = getattr(op, f.name)
        if isinstance(f.kind, Key):
            changes[f.name] = one(value)
        elif isinstance(f.kind, Keys) and isinstance(value, tuple):
            changes[f.name] = tuple(map(one, value))
        elif isinstance(f.kind, Batch) and isinstance(value, tuple):
            changes[f.name] = tuple((one(i[0]), i[1]) if isinstance(i, tuple) else i for i in value)
    return cast(Op, replace(cast(Any, op), **changes)) if changes else op


def _distinct_keys(ops: tuple[Any, ...]) -> list[object]:
    seen: list[object] = []
    for op in ops:
        if isinstance(op, Release):
            continue
        for key in keys_of(op):
            if not isinstance(key, Bad) and all(key != k or type(key) is not type(k) for k in seen):
                seen.append(key)
    return seen


def _cuts(ops: tuple[T, ...]) -> Iterator[tuple[T, ...]]:
    """``ops`` with a run cut out: halves first, then shorter runs, last ops first."""
    run = max(len(ops) // 2, 1)
    while run >= 1:
        for start in range(len(ops) - run, -1, -run):
            yield ops[:start] + ops[start + run :]
        run //= 2


def _op_changes(ops: tuple[Any, ...], simpler: Callable[[Any], Iterator[Any]]) -> Iterator[tuple[Any, ...]]:
    for index, op in enumerate(ops):
        for other in simpler(op):
            yield (*ops[:index], other, *ops[index + 1 :])


def merged(first: Op, second: Op) -> Op | None:
    """One op doing what two of the same kind do, their key lists and
    batches joined (a put of many objects where there were several puts),
    or None when they differ in anything else or cannot be joined."""
    if type(first) is not type(second):
        return None
    changes: dict[str, Any] = {}
    for f in kind_of(first).fields:
        a, b = getattr(first, f.name), getattr(second, f.name)
        if isinstance(f.kind, (Keys, Batch)):
            if not (isinstance(a, tuple) and isinstance(b, tuple)) or len(a) + len(b) > max(f.kind.most, 1) * 8:
                return None
            changes[f.name] = a + b
        elif a != b:
            return None
    return cast(Op, replace(cast(Any, first), **changes)) if changes else None


def _op_merges(ops: tuple[Any, ...]) -> Iterator[tuple[Any, ...]]:
    """Two neighbouring ops of a kind made one: fewer ops for a bug that needs many keys at once."""
    for index in range(len(ops) - 1):
        if isinstance(ops[index], Release) or isinstance(ops[index + 1], Release):
            continue
        one = merged(ops[index], ops[index + 1])
        if one is not None:
            yield (*ops[:index], one, *ops[index + 2 :])


def _key_merges(ops: tuple[Any, ...]) -> Iterator[tuple[Any, ...]]:
    """Fewer distinct keys: a later key made an earlier one of its type."""
    keys = _distinct_keys(ops)
    for late in reversed(keys):
        for early in keys:
            if early is late or early == late:
                break
            if type(early) is type(late):
                yield tuple(op if isinstance(op, Release) else renamed(op, late, early) for op in ops)


def _smaller_capacity(max_bytes: object, object_nbytes: object) -> Iterator[int]:
    if type(max_bytes) is int and type(object_nbytes) is int and object_nbytes > 0:
        for capacity in range(1, max_bytes // object_nbytes):
            yield capacity * object_nbytes


# ------------------------------------------------------- sequential traces


def shrink_trace(
    trace: Trace,
    failure: Any,
    fails: Callable[[Trace], Any],
    cut: Callable[[Trace, Any], Trace],
    tries: int = TRIES,
    seconds: float = SECONDS,
) -> Shrunk[Trace]:
    """The smallest trace found that still fails. ``fails(trace)`` is its
    failure or None; ``cut(trace, failure)`` drops the ops after the one
    that failed (a failure names its op)."""
    search: _Search[Trace] = _Search(fails, tries, seconds)
    best = cut(trace, failure)

    def candidates(now: Trace) -> Iterator[Trace]:
        for ops in _cuts(now.ops):
            yield replace(now, ops=ops)
        for ops in _op_merges(now.ops):
            yield replace(now, ops=ops)
        for ops in _op_changes(now.ops, simpler_ops):
            yield replace(now, ops=ops)
        for ops in _key_merges(now.ops):
            yield replace(now, ops=ops)
        for max_bytes in _smaller_capacity(now.max_bytes, now.object_nbytes):
            yield replace(now, max_bytes=max_bytes)

    while (found := search.first_failing(candidates(best))) is not None:
        best, failure = cut(*found), found[1]
    return Shrunk(best, failure, search.tries, search.ended_by)


# ------------------------------------------------------- background scenarios


def _simpler_steps(step: Step) -> Iterator[Step]:
    if isinstance(step, Release):
        if step.batches > 1:
            yield Release(step.batches - 1)
        return
    yield from simpler_ops(step)


def shrink_scenario(
    scenario: Scenario, failure: Any, fails: Callable[[Scenario], Any], tries: int = TRIES, seconds: float = SECONDS
) -> Shrunk[Scenario]:
    """The smallest background scenario found that still fails
    (``fails(scenario)``: its failure or None): fewer steps (owner calls and
    the writer's releases alike), no fault, a close instead of a drop, a
    shorter queue, simpler calls, fewer keys, a smaller inner store."""
    search: _Search[Scenario] = _Search(fails, tries, seconds)

    def candidates(now: Scenario) -> Iterator[Scenario]:
        if now.ending == "drop":
            yield replace(now, ending="close")
        for ops in _cuts(now.ops):
            yield replace(now, ops=ops)
        for ops in _op_merges(now.ops):
            yield replace(now, ops=ops)
        if now.faults:
            yield replace(now, faults=())
        bound = now.max_pending_batches
        if type(bound) is int and bound > 1:
            yield from (replace(now, max_pending_batches=smaller) for smaller in range(1, bound))
        for ops in _op_changes(now.ops, _simpler_steps):
            yield replace(now, ops=ops)
        for ops in _key_merges(now.ops):
            yield replace(now, ops=ops)
        for max_bytes in _smaller_capacity(now.max_bytes, now.object_nbytes):
            yield replace(now, max_bytes=max_bytes)

    best = scenario
    while (found := search.first_failing(candidates(best))) is not None:
        best, failure = found
    return Shrunk(best, failure, search.tries, search.ended_by)


def owner_calls(scenario: Scenario) -> int:
    """How many owner calls a scenario makes (its length as a counterexample)."""
    return sum(1 for step in scenario.ops if not isinstance(step, Release))
