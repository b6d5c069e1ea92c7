"""The depth phase of ``verify``: long store lives on the spec and a target,
and the shrinking of what they find into a short vector.

``generators.depth`` makes the lives; each runs through the one compare
loop (``engine.compare``) on ``models.incremental`` (the model's semantics
stepped in place, O(call)): every op's outcome is compared, the whole state
and the invariants every ``Life.every`` ops and after the last. A life that
outlasts the phase's time stops where it is, and the run reports the depth
it reached.

A divergence found hundreds of thousands of ops in is shrunk while it still
diverges, by cuts the spec makes (nearly) free of meaning, biggest first:
every op of one class left out (misses, failed puts, hits, observations),
runs of ops cut in halves, quarters and so on, adjacent reads joined into
one read (many touches of one key become one read that repeats it),
adjacent pin-only or release-only puts joined into one retain or release
list, puts that do nothing removed, the store made smaller. A deep bug keeps
the depth it needs (65,536 touches stay 65,536 touches) in few calls. The
shrunk trace is then compared precisely on the model itself, when that is
cheap, so its report names the first op that differs, with the state before
it, like any other divergence.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import cast

from auxspec.drivers import gated
from auxspec.engine import budget
from auxspec.engine.compare import Divergence, compare
from auxspec.engine.ops import Get, Op, Put, Trace
from auxspec.engine.table import kind_of
from auxspec.engine.target import Target
from auxspec.generators import depth
from auxspec.generators.background import Scenario
from auxspec.models import incremental
from auxspec.models.sequential import Err, Kind, Outcome

SHRINK_SECONDS = 30.0  # the most the shrinking of one depth catch may take
PRECISE_COST = 4_000_000  # ops x slots under which the shrunk trace is compared on the model itself


@dataclass
class DepthRun:
    """What the phase did: the divergence (or None) and the life it was
    found in, the depth reached, the lives and ops run, whether every life
    ran to its end, and how long the found trace was before shrinking."""

    divergence: Divergence | None
    life: str | None
    depth: depth.Depth
    lives: int
    ops: int
    seconds: float
    complete: bool
    found_at: int | None = None  # the op the divergence was found at, in its life
    shrink_seconds: float = 0.0
    # A background store's violation (the background life, run by the gated
    # driver): the scenario, cut to the rounds that still violate, and its report.
    scenario: Scenario | None = None
    violation: str | None = None
    background_seconds: float = 0.0  # the background life's time (not counted in ``max_time``)


class _OutOfTime(BaseException):
    """Raised from the compare loop's state hook when the phase's time is up
    (a BaseException: a port's ``except Exception`` lets it through)."""


def explore_depth(
    target: Target,
    profile: str,
    seed: int,
    max_time: float,
    known: frozenset[str] = frozenset(),
    scale: depth.Scale = depth.FULL,
    shrink_seconds: float = SHRINK_SECONDS,
) -> DepthRun:
    """Run the lives of ``seed`` on ``target`` for at most ``max_time``
    seconds (generation included); shrink the first divergence that is not
    a deviation in ``known``."""
    started = time.monotonic()
    plans = depth.lives(profile, target.features, seed, scale)
    made: list[depth.Life] = []
    reached: list[int] = []
    complete = True
    queued = 0
    background_seconds = 0.0
    if target.background is not None and target.observe is not None:
        # First: a few thousand owner calls, in process, the writer held. Its
        # time is the background store's (verify charges it to that phase),
        # so the store's own lives keep all of ``max_time``.
        background = depth.background_life(profile, target.features, seed, scale)
        violation = background_violation(target, background.scenario)
        background_seconds = time.monotonic() - started
        if violation is not None:
            scenario, violation = _fewer_rounds(target, background, violation)
            return DepthRun(
                None,
                background.name,
                depth.Depth(),
                1,
                len(background.scenario.ops),
                time.monotonic() - started,
                False,
                scenario=scenario,
                violation=violation,
                background_seconds=background_seconds,
            )
        queued = background.depth.queued
    deadline = time.monotonic() + max_time
    for plan in plans:
        if time.monotonic() > deadline:
            complete = False
            break
        life = plan.build()
        made.append(life)
        reached.append(0)
        stepped = [0]

        def count(_: object, stepped: list[int] = stepped) -> None:
            stepped[0] += 1
            if time.monotonic() > deadline:  # every op: one of the wide life's can take a slow port seconds
                raise _OutOfTime

        try:
            found = _judge(life.trace, target, life.every, count)
        except _OutOfTime:
            reached[-1] = stepped[0] - 1
            complete = False
            break
        reached[-1] = len(life.trace.ops) if found is None else found.step + 1
        if found is None:
            continue
        shrink_started = time.monotonic()
        every = life.every

        def judge(trace: Trace, every: int = every) -> Divergence | None:
            return _judge(trace, target, every)

        shrunk = shrink(found, judge, shrink_seconds)
        final = precise(shrunk, target)
        if final.deviation in known:
            continue
        return DepthRun(
            final,
            life.name,
            depth.figures(made, reached),
            len(made),
            sum(reached),
            time.monotonic() - started,
            False,
            found.step + 1,
            time.monotonic() - shrink_started,
        )
    figures = depth.figures(made, reached)
    figures.queued = queued
    seconds = time.monotonic() - started
    return DepthRun(
        None, None, figures, len(made), sum(reached), seconds, complete, background_seconds=background_seconds
    )


def background_violation(target: Target, scenario: Scenario) -> str | None:
    """The gated driver's report of how the target's background store ran
    ``scenario`` in a way the background spec does not allow, or None."""
    try:
        gated.run_scenario(target, scenario)
    except gated.Violation as violation:
        return str(violation)
    return None


def _fewer_rounds(target: Target, life: depth.BackgroundLife, violation: str) -> tuple[Scenario, str]:
    """The background life cut to fewer rounds that still violate: the
    shortest prefix of rounds (bisected), then its last round alone. The
    writer's schedule shrinks further call by call in the report
    (``verify.shrink_background``)."""
    low, high = 1, len(life.rounds)  # rounds[:high] violates
    while low < high:
        middle = (low + high) // 2
        again = background_violation(target, life.only(range(middle)))
        if again is None:
            low = middle + 1
        else:
            high, violation = middle, again
    best = life.only(range(high))
    alone = life.only(range(high - 1, high))
    if high > 1 and (again := background_violation(target, alone)) is not None:
        best, violation = alone, again
    return best, violation


def _judge(
    trace: Trace, target: Target, every: int, on_state: Callable[[object], None] | None = None
) -> Divergence | None:
    """The one compare on the in-place spec: outcomes after every op, the
    whole state every ``every`` ops and after the last; no replay."""
    return compare(trace, target, on_state, every=every, replay=False, semantics=incremental)


def precise(found: Divergence, target: Target) -> Divergence:
    """``found`` compared again on the model itself after every op, when its
    trace is short enough for that, so the report names the first op that
    differs with the state before it; else ``found`` as it is."""
    trace = found.trace
    sizes = trace.max_bytes, trace.object_nbytes
    slots = sizes[0] // sizes[1] if isinstance(sizes[0], int) and isinstance(sizes[1], int) and sizes[1] > 0 else 0
    # The in-place spec's state is the state after the last op, not the one
    # before the op that differs: dropped, so no deviation is judged on it.
    fast = replace(found, before=None)
    if len(trace.ops) * max(slots, 1) > PRECISE_COST:
        return fast
    again = compare(trace, target)
    return again if again is not None else fast


# --------------------------------------------------------------- shrinking


def _cut(found: Divergence) -> Divergence:
    """``found`` with its trace ending at the op that diverged."""
    trace = found.trace
    if found.step + 1 >= len(trace.ops):
        return found
    return replace(found, trace=replace(trace, ops=trace.ops[: found.step + 1]))


def shrink(found: Divergence, judge: Callable[[Trace], Divergence | None], seconds: float) -> Divergence:
    """The smallest trace that still diverges that the cuts below reach in
    ``seconds``: any candidate that diverges (the same way or not) is kept."""
    deadline = time.monotonic() + seconds
    best = _cut(found)
    improved = True
    with budget.until(deadline), contextlib.suppress(budget.OutOfTime):  # a candidate stops at the deadline too
        while improved and time.monotonic() < deadline:
            improved = False
            for candidate in _candidates(best.trace):
                if time.monotonic() > deadline:
                    break
                if len(candidate.ops) > len(best.trace.ops) or candidate == best.trace:
                    continue
                again = judge(candidate)
                if again is not None:
                    best, improved = _cut(again), True
                    break
    return best


def spec_outcomes(trace: Trace) -> list[Outcome]:
    """The spec's outcome of each op, on the in-place spec (each op costs its
    own size); none when the store cannot be built. Within a shrink's deadline."""
    assert isinstance(trace.max_bytes, int) and isinstance(trace.object_nbytes, int)  # a depth life's sizes
    live = incremental.new(trace.max_bytes, trace.object_nbytes, trace.profile)
    if not isinstance(live, incremental.Live):
        return []
    outcomes = []
    for index, op in enumerate(trace.ops):
        budget.check_every(index)
        outcomes.append(depth.spec_step(live, op))
    return outcomes


_CLASSES = ("no-op put", "observation", "miss", "failed put", "read", "hit", "pin", "put")


def _class_of(op: Op, outcome: Outcome) -> str:
    name = kind_of(op).name
    if name in ("stats", "len", "contains", "flush"):
        return "observation"
    if name in ("get", "read_into"):
        return "miss" if outcome == Err(Kind.MISSING) else "read" if isinstance(outcome, Err) else "hit"
    if name == "put":
        put = cast(Put, op)
        if not (put.objects or put.retain or put.release):
            return "no-op put"
        if isinstance(outcome, Err):
            return "failed put"
        return "pin" if not put.objects else "put"
    return "other"


def _candidates(trace: Trace) -> Iterator[Trace]:
    """Smaller traces, the biggest cuts first; the last op (where it
    diverged) is always kept."""
    ops = trace.ops
    if len(ops) < 2:
        return
    last, body = ops[-1], ops[:-1]
    classes = [_class_of(op, outcome) for op, outcome in zip(ops, spec_outcomes(trace), strict=True)][:-1]

    def made(kept: tuple[Op, ...]) -> Trace:
        return replace(trace, ops=(*kept, last))

    def rebuilt(cuts: list[int]) -> Iterator[Trace]:
        kept = sorted({cut for cut in cuts if 0 < cut < len(body)})
        prefixes = _rebuilds(trace, kept)
        for cut in reversed(kept):
            if prefixes[cut] is not None:
                yield made((*prefixes[cut], *body[cut:]))  # type: ignore[misc]

    n = len(body)
    # The state before the last few calls, rebuilt in one put (a big-call bug
    # shrinks to two or three calls), then the calls that change no state
    # (all at once, then one class at a time), then longer rebuilt prefixes.
    yield from rebuilt([n - 1, n - 4, n - 16, n - n // 16, n - n // 8])
    for names in ({"no-op put", "miss", "read"}, *({name} for name in _CLASSES)):
        if names & set(classes):
            yield made(tuple(op for op, kind in zip(body, classes, strict=True) if kind not in names))
    yield from rebuilt([n - n // 4, n // 2, n // 4])
    joined = _joined(body, classes)
    if len(joined) < len(body):
        yield made(joined)
    size = len(body) // 2
    while size >= 1:
        for start in range(0, len(body), size):
            yield made(body[:start] + body[start + size :])
        size //= 2
    if isinstance(trace.max_bytes, int) and isinstance(trace.object_nbytes, int):
        slots = trace.max_bytes // trace.object_nbytes
        for fewer in (slots // 2, slots - 1):
            if fewer >= 1:
                yield replace(trace, max_bytes=fewer * trace.object_nbytes)


def rebuilt(trace: Trace, cut: int) -> tuple[Op, ...] | None:
    """One put that rebuilds the spec's state after the first ``cut`` ops of
    a deep trace (``_rebuilds``); None when the store is closed by then."""
    return _rebuilds(trace, [cut])[cut]


def _rebuilds(trace: Trace, cuts: list[int]) -> dict[int, tuple[Op, ...] | None]:
    """For each of ``cuts`` (ascending), one put that rebuilds the spec's
    state after the first that many ops: the stored keys in recency order
    with their payloads, and every count as a retain list (None when the
    store is closed by then). The counters of what happened (and a port's
    own) start again, so only a bug that needs no more depth than the rest
    of the trace has survives the cut. One pass over the trace."""
    assert isinstance(trace.max_bytes, int) and isinstance(trace.object_nbytes, int)
    live = incremental.new(trace.max_bytes, trace.object_nbytes, trace.profile)
    assert isinstance(live, incremental.Live)
    found: dict[int, tuple[Op, ...] | None] = {}
    at = 0
    for cut in cuts:
        for index, op in enumerate(trace.ops[at:cut]):
            budget.check_every(index)  # a rebuild is a pass over a deep trace: within the shrink's deadline
            depth.spec_step(live, op)
        at = cut
        retain = tuple(key for key, count in live.counts.items() for _ in range(count))
        found[cut] = None if live.closed else (Put(tuple(live.order.items()), retain),)
    return found


def _joined(ops: tuple[Op, ...], classes: list[str]) -> tuple[Op, ...]:
    """Adjacent reads that succeed joined into one read; adjacent puts that
    only retain (or only release) and succeed joined into one retain (or
    release) list: the same moves, counts and terminal order in the spec,
    in fewer calls."""
    out: list[Op] = []
    last_class = ""
    for op, kind in zip(ops, classes, strict=True):
        previous = out[-1] if out else None
        # "hit" and "pin" are classes of reads and puts (_class_of); the rows tell which op is which.
        same = previous is not None and kind_of(previous) is kind_of(op)
        if kind == last_class == "hit" and same and kind_of(op).name == "get" and cast(Get, op).form == "list":
            out[-1] = Get(_listed(cast(Get, previous).keys) + _listed(cast(Get, op).keys))
        elif kind == last_class == "pin" and same and _same_pins(cast(Put, previous), cast(Put, op)):
            before, now = cast(Put, previous), cast(Put, op)
            retain = _listed(before.retain) + _listed(now.retain)
            out[-1] = Put((), retain, _listed(before.release) + _listed(now.release))
        else:
            out.append(op)
            last_class = kind
    return tuple(out)


def _listed(keys: object) -> tuple[str, ...]:
    """A key list of the depth phase's ops (valid: a tuple of str)."""
    assert isinstance(keys, tuple)
    return keys


def _same_pins(a: Put, b: Put) -> bool:
    """Both puts of no objects only retain, or both only release, as lists."""
    if a.form != "list" or b.form != "list" or a.objects or b.objects:
        return False
    return (not a.release and not b.release) or (not a.retain and not b.retain)
