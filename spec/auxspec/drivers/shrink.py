"""Shrink a counterexample to one a port author can act on.

Whatever phase found it, a counterexample is made smaller the same way:
first fewer ops (whole classes of ops at once: the puts that do nothing,
every op of one kind, every run of neighbouring ops of a kind made one op
where the spec makes the calls equivalent, so a deep trace loses thousands
of calls in one try; then runs of ops cut, longest runs first; neighbouring
ops of a kind made one, their key lists and batches joined), then simpler ops
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

import itertools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any, Generic, TypeVar, cast

from auxspec.engine import budget
from auxspec.engine.fields import Batch, Form, Key, Keys, Shape
from auxspec.engine.ops import Bad, Get, Op, Put, Trace, runs
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
        # The deadline holds inside a candidate too (engine.budget): one replay of a deep
        # trace, or the spec's pass that makes the next candidates, may outlast the budget.
        with budget.until(self.deadline):
            try:
                for candidate in candidates:
                    if self.out_of_budget():
                        return None
                    self.tries += 1
                    failure = self.fails(candidate)
                    if failure is not None:
                        return candidate, failure
            except budget.OutOfTime:
                self.ended_by = "time"
        return None


# ------------------------------------------------------------- ops


FINEST = 32  # a list longer than this is cut in runs of at least 1/FINEST of it, never element by element


def _without(values: tuple[Any, ...]) -> Iterator[tuple[Any, ...]]:
    """``values`` with a run left out: halves first, then shorter runs, down to
    single elements for a short list (a long one, from a deep trace, stops at
    runs of 1/``FINEST`` of it, so one list does not take the whole budget)."""
    finest = max(len(values) // FINEST, 1)
    run = max(len(values) // 2, 1)
    while run >= finest:
        for start in range(0, len(values), run):
            yield values[:start] + values[start + run :]
        run //= 2


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


MERGED_MOST = 1 << 17  # the longest list a merge of a whole run makes (65,536 touches of a 16-bit counter fit)


def merged(first: Op, second: Op, most: int | None = None) -> Op | None:
    """One op doing what two of the same kind do, their key lists and
    batches joined (a put of many objects where there were several puts,
    a read that repeats a key where there were many touches of it, one
    retain list where there were many pins), or None when they differ in
    anything else or the joined list would pass ``most`` (eight times the
    decoder's list length when None)."""
    if type(first) is not type(second):
        return None
    changes: dict[str, Any] = {}
    for f in kind_of(first).fields:
        a, b = getattr(first, f.name), getattr(second, f.name)
        if isinstance(f.kind, (Keys, Batch)):
            longest = max(f.kind.most, 1) * 8 if most is None else most
            if not (isinstance(a, tuple) and isinstance(b, tuple)) or len(a) + len(b) > longest:
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


def _all_merged(ops: tuple[Any, ...], outcomes: tuple[object, ...] | None = None) -> tuple[Any, ...]:
    """Every run of neighbouring ops of a kind made one op (lists up to
    ``MERGED_MOST``), the last op kept as it is: where the spec makes the
    calls equivalent (many touches of one key as one read that repeats it,
    many pins as one retain list, single-key puts as one batch), a deep
    trace loses thousands of calls in one candidate. Given ``outcomes`` (the
    kind of the spec's outcome of each op: ok, or the error's kind), only
    ops of the same outcome are joined: a read that misses fails whole, so
    joined with reads that hit it would take their hits with it."""
    if len(ops) < 3:
        return ops
    out: list[Any] = []
    group: object = None  # the outcome of the ops joined into out[-1]
    for index, op in enumerate(ops[:-1]):
        one = None
        same = outcomes is None or (index < len(outcomes) and outcomes[index] == group)
        if out and same and not isinstance(op, Release) and not isinstance(out[-1], Release):
            one = merged(out[-1], op, MERGED_MOST)
        if one is not None:
            out[-1] = one
        else:
            out.append(op)
            group = outcomes[index] if outcomes is not None and index < len(outcomes) else None
    return (*out, ops[-1])


def _does_nothing(op: Any) -> bool:
    """A put of no objects, no retains and no releases (the spec's no-op)."""
    if isinstance(op, Release) or kind_of(op).name != "put":
        return False
    return all(not getattr(op, f.name) for f in kind_of(op).fields if isinstance(f.kind, (Keys, Batch)))


def _bulk_cuts(
    ops: tuple[Any, ...], outcomes: Callable[[], tuple[object, ...]] | None = None
) -> Iterator[tuple[Any, ...]]:
    """Whole classes of ops at once, the last op kept: every run of ops of a
    kind merged into one (given ``outcomes``: of the same outcome first, and
    every call that fails with one error kind left out), the puts that do
    nothing left out, then every op of one kind (all the stats() calls, all
    the reads, ...). One candidate each, so a trace of
    100,000 calls shrinks in a few tries."""
    if len(ops) < 3:
        return
    tried: list[tuple[Any, ...]] = []
    if outcomes is not None:
        results = outcomes()
        alike = _all_merged(ops, results)  # first: on a deep trace the clock may allow only a few tries
        if len(alike) < len(ops):
            tried.append(alike)
            yield alike
        # Then the calls that fail, one error kind at a time (a read that
        # misses between reads that hit): what is left joins further.
        for failed in sorted({str(r) for r in results[:-1] if r != "ok"}):
            kept = tuple(op for op, r in zip(ops[:-1], results, strict=False) if str(r) != failed)
            if kept:
                tried.append((*kept, ops[-1]))
                yield (*kept, ops[-1])
    together = _all_merged(ops)
    if len(together) < len(ops) and together not in tried:
        yield together
    body, last = ops[:-1], ops[-1]
    kept = tuple(op for op in body if not _does_nothing(op))
    if len(kept) < len(body):
        yield (*kept, last)
    kinds = {kind_of(op).name for op in body if not isinstance(op, Release)}
    for name in sorted(kinds):
        kept = tuple(op for op in body if isinstance(op, Release) or kind_of(op).name != name)
        if kept:
            yield (*kept, last)


def work(ops: tuple[Any, ...]) -> int:
    """What replaying ``ops`` costs, in the unit of one call or one key of a list."""
    total = len(ops)
    for op in ops:
        if not isinstance(op, Release):
            lists = (getattr(op, f.name) for f in kind_of(op).fields if isinstance(f.kind, (Keys, Batch)))
            total += sum(len(value) for value in lists if isinstance(value, tuple))
    return total


def affordable(ops: tuple[Any, ...]) -> int:
    """The most ``work`` a candidate of ``ops`` may cost: a call repeated, or a
    run made its biggest call, would otherwise turn one call of 5,000 keys into
    40,000 of them, one candidate taking longer than the whole search."""
    now = work(ops)
    return max(2 * now, now + MERGED_MOST)


def entry_count(ops: tuple[Any, ...]) -> int:
    """How many entries ``ops`` take as a counterexample: a call made many
    times in a row is one (a vector writes it once with ``times``, a report
    prints it once with "× N")."""
    return len(runs(ops))


def _reads_of_one_key(trace: Trace, outcomes: tuple[object, ...]) -> Iterator[tuple[Any, ...]]:
    """The reads that hit made reads of one key that one put stores: as many
    keys read up to ``MERGED_MOST`` (a counter of hits or touches counts as
    far), in two entries (one put, one read), the last op kept. Where the
    reads' keys are kept stored by puts between them the whole trace goes
    but for those."""
    ops = trace.ops
    size = trace.object_nbytes
    if len(ops) < 3 or type(size) is not int or size < 0:
        return
    read: list[tuple[Any, ...]] = []  # a read_into that succeeds hits as a get does
    for op, outcome in zip(ops[:-1], outcomes, strict=False):
        keys = cast(Get, op).keys if kind_of(op).name in ("get", "read_into") and outcome == "ok" else None
        if isinstance(keys, tuple):
            read.append(keys)
    total = sum(map(len, read))
    key = next((keys[0] for keys in read if keys and type(keys[0]) is str), None)
    if key is None or total < 2:
        return
    # At most one read of MERGED_MOST keys (past a 16-bit counter twice over): a deep trace may
    # read millions of keys, which would make this one candidate cost more than the whole search.
    yield (Put(((key, bytes(size)),)), Get((key,) * min(total, MERGED_MOST)), ops[-1])


Rebuild = Callable[[Trace, int], tuple[Op, ...] | None]  # calls that make the spec's state after ops[:cut]


def _one_class_repeated(
    trace: Trace, outcomes: tuple[object, ...], rebuild: Rebuild | None = None
) -> Iterator[tuple[Any, ...]]:
    """For each class of calls (a kind of op with one kind of outcome: the
    puts that fail for capacity, the reads that hit, ...), that class's
    first call made as many times as the class has calls, then the last op;
    before them, given ``rebuild``, a call that rebuilds the state the first
    was made in (then the whole trace is three or four entries; the class's
    last call first, then its first), else the trace up to the first. The
    classes that fail first, then the most numerous. A counter of one class of calls (failed puts
    wrapping at 1,024) counts as far, where the first call repeats alike (a
    put that fails changes nothing under strict)."""
    ops = trace.ops
    body = ops[:-1]
    if len(body) < 2:
        return
    classes: dict[tuple[str, object], list[int]] = {}
    for index, op in enumerate(body):
        if not isinstance(op, Release) and index < len(outcomes):
            classes.setdefault((kind_of(op).name, outcomes[index]), []).append(index)
    # The classes that fail first (a counter of failures), then the most numerous (a counter of calls):
    # on a deep trace the clock allows a few of these candidates, each a pass to rebuild and a judge.
    repeated = [
        classes[label]
        for label in sorted(classes, key=lambda label: (label[1] == "ok", -len(classes[label])))
        if len(classes[label]) > 1
    ]
    for at in (-1, 0) if rebuild is not None else ():
        # Each class's last call (made in the state nearest the end: a pin that a counter's
        # maintenance drops is held there), then its first, in the state it was made in, rebuilt.
        for indexes in repeated:
            one = indexes[at]
            before = rebuild(trace, one) if one and rebuild is not None else ()
            if before is not None:
                yield (*before, *[body[one]] * len(indexes), ops[-1])
    for indexes in repeated:
        first = indexes[0]
        yield (*body[:first], *[body[first]] * len(indexes), ops[-1])


NOTHING = Put()  # the spec's no-op call: a put of no objects, no retains and no releases
TAILS = (4, 16, 64, 256, 1_024)  # the calls before the divergence that a count-keeping rebuild keeps


def _rebuilt_keeping_count(trace: Trace, rebuild: Rebuild) -> Iterator[tuple[Any, ...]]:
    """The trace but for its last few calls (``TAILS``) made the spec's state
    before them, rebuilt in one put, after as many puts that do nothing as
    there were puts before it but one: the spec's state and the number of put
    calls a port has seen are the same where the kept calls start. A counter
    of put calls (a 16-bit put number wrapping after 65,536 puts) then needs
    no other call: the trace is three entries and the tail."""
    ops = trace.ops
    for tail in TAILS:
        cut = len(ops) - 1 - tail
        if cut < 2:
            return
        puts = sum(1 for op in ops[:cut] if not isinstance(op, Release) and kind_of(op).name == "put")
        before = rebuild(trace, cut) if puts >= 1 else None
        if before is not None and len(before) <= puts:
            yield (*[NOTHING] * (puts - len(before)), *before, *ops[cut:])


ALIKE_RUNS = 8  # the longest runs that are made alike one at a time, after all of them at once


def _alike(ops: tuple[Any, ...], outcomes: tuple[object, ...] | None = None) -> Iterator[tuple[Any, ...]]:
    """Neighbouring calls made the same call: each run of ops of one kind
    (and, given ``outcomes``, one outcome: a failing put stays a failing put)
    with every op replaced by one of them (``_PICKS``); all runs at once,
    then the longest runs one at a time. A bug that needs
    N calls (a counter of puts, of failed puts, maintenance every N puts)
    keeps its N calls and they become one entry (``times``); the last op is
    kept as it is."""
    if len(ops) < 3:
        return
    body = ops[:-1]
    groups: list[list[int]] = []  # [start, end] of each run of one kind and one outcome
    labels: list[tuple[str, object]] = []
    for index, op in enumerate(body):
        kind = "writer" if isinstance(op, Release) else kind_of(op).name
        label = kind, outcomes[index] if outcomes is not None and index < len(outcomes) else None
        if labels and labels[-1] == label:
            groups[-1][1] = index + 1
        else:
            groups.append([index, index + 1])
            labels.append(label)
    mixed = [
        (start, end)
        for (start, end), (kind, _) in zip(groups, labels, strict=True)
        if kind != "writer" and any(body[i] != body[start] for i in range(start + 1, end))
    ]
    tried: list[list[Any]] = []
    chosen_sets = [mixed, *([run] for run in sorted(mixed, key=lambda r: r[0] - r[1])[:ALIKE_RUNS])]
    for chosen in chosen_sets if mixed else []:
        for pick in _PICKS:
            out = list(body)
            for start, end in chosen:
                out[start:end] = pick(body[start:end])
            if out not in tried:
                tried.append(out)
                yield (*out, ops[-1])


# How a run is made alike: every call its last; every call its first; every
# call but the last its first (a bug that needs N calls before a different
# one: 64 batches, then the one the wrapped sequence number skips).
_PICKS: tuple[Callable[[tuple[Any, ...]], list[Any]], ...] = (
    lambda run: [run[-1]] * len(run),
    lambda run: [run[0]] * len(run),
    lambda run: [run[0]] * (len(run) - 1) + [run[-1]],
)


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
    outcomes: Callable[[Trace], tuple[object, ...]] | None = None,
    rebuild: Rebuild | None = None,
) -> Shrunk[Trace]:
    """The smallest trace found that still fails. ``fails(trace)`` is its
    failure or None; ``cut(trace, failure)`` drops the ops after the one
    that failed (a failure names its op). ``outcomes(trace)``: the kind of
    the spec's outcome of each op, so that joined calls are calls of the
    same outcome (``_all_merged``). ``rebuild(trace, n)``: calls that make
    the spec's state after the first n ops, or None (``_one_class_repeated``)."""
    search: _Search[Trace] = _Search(fails, tries, seconds)
    best = cut(trace, failure)

    def candidates(now: Trace) -> Iterator[Trace]:
        known: list[tuple[object, ...]] = []  # the spec's outcome kinds of now's ops: a deep trace's take a pass

        def kinds() -> tuple[object, ...]:
            assert outcomes is not None
            if not known:
                known.append(outcomes(now))
            return known[0]

        # First, as a deep trace's clock allows few tries: the same calls or more in fewer entries, each
        # kept only when the entries do go down, so the search cannot cycle.
        entries = entry_count(now.ops)
        most = affordable(now.ops)
        alike = _alike(now.ops, None if outcomes is None else kinds())
        by_class = () if outcomes is None else _one_class_repeated(now, kinds(), rebuild)
        one_key = () if outcomes is None else _reads_of_one_key(now, kinds())
        counted = () if rebuild is None else _rebuilt_keeping_count(now, rebuild)
        for ops in itertools.chain(one_key, counted, by_class, alike):
            if entry_count(ops) < entries and work(ops) <= most:
                yield replace(now, ops=ops)
        for ops in _bulk_cuts(now.ops, None if outcomes is None else kinds):
            yield replace(now, ops=ops)
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
        entries = owner_entries(now.ops)
        for ops in _alike(now.ops):  # the same owner calls in fewer entries, as for a sequential trace
            if owner_entries(ops) < entries:
                yield replace(now, ops=ops)
        for ops in _bulk_cuts(now.ops):
            yield replace(now, ops=ops)
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


def owner_entries(steps: tuple[Step, ...]) -> int:
    """The owner-call lines of a background vector of ``steps``: a call made
    many times in a row (no writer release between) is one, with ``times``."""
    count = 0
    for index, step in enumerate(steps):
        if not isinstance(step, Release) and (index == 0 or steps[index - 1] != step):
            count += 1
    return count
