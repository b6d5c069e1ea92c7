"""Verify a target store against the spec: replay vectors, exhaust a small
scope, explore, shrink.

The phases: the vectors; every trace of a small scope
(``generators.exhaustive``), so small-scope completeness is a guarantee;
then a random search in which ``generators.inputs`` draws bytes and
``engine.codec`` decodes them (the same decoder the fuzzers use),
alternating the classic scope and the scaled one (a swarm configuration,
sizes across scales), with coverage-guided turns between; a divergence's
input is cut down (a shorter input is a shorter trace) and its trace
shrunk (``drivers.shrink``). ``Reach`` records the largest value each
dimension reached. Last, ``explore_large`` runs the traces of ``generators.large`` over a 2.2 GB
store, whose offsets cross 2^30 and 2^31.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from random import Random
from typing import IO, Any

from hypothesis import HealthCheck, Phase, configuration, find, settings
from hypothesis import strategies as st
from hypothesis.errors import Flaky, NoSuchExample

from auxspec.drivers import depth as depth_phase
from auxspec.drivers import gated, shrink
from auxspec.drivers.protocol import process_target
from auxspec.engine import traces
from auxspec.engine.codec import SCALED, SPECIAL_SIZES, decode
from auxspec.engine.compare import Divergence, compare, compare_stream
from auxspec.engine.domain import SIZE_SWEEP, Domain
from auxspec.engine.expect import expected_outcomes
from auxspec.engine.ops import PYTHON, Trace
from auxspec.engine.table import invoke
from auxspec.engine.target import PortBroken, Target
from auxspec.generators import exhaustive, guided, inputs, large
from auxspec.generators.background import Scenario, background_scenario, scaled_background_scenario
from auxspec.models import incremental
from auxspec.models.sequential import Ok, Outcome, State

# The scope the random phase is meant to reach, per dimension (issue 12):
# what the scope report calls "not reached" when a run ends short of it.
SCOPE = {"slots": 64, "object_nbytes": 8192, "ops": 200, "pins": 3, "keys_over_slots": 3, "key_list": 5}


@dataclass
class Reach:
    """The largest value each dimension reached, and the traces per phase."""

    slots: int = 0
    object_nbytes: int = 0
    keys: int = 0  # distinct keys in one trace
    keys_over_slots: float = 0.0  # distinct keys / capacity, in one trace
    ops: int = 0
    pins: int = 0  # the highest reference count of a key
    key_list: int = 0  # the longest key list or batch in one op
    queue: int = 0  # the largest max_pending_batches of a background scenario
    ops_run: int = 0  # ops of every trace recorded, for the ops/s figures
    phases: dict[str, dict[str, float]] = field(default_factory=dict)
    domain: Domain = field(default_factory=Domain)  # the input classes the traces held (engine.domain)
    depth_short: list[str] = field(default_factory=list)  # the depth phase's goals it left short (explore_depth)

    def trace(self, trace: Trace) -> None:
        """Record what a trace reaches without running it."""
        keys = self.domain.trace(trace)
        if not (isinstance(trace.max_bytes, int) and isinstance(trace.object_nbytes, int)) or trace.object_nbytes < 1:
            return
        slots = trace.max_bytes // trace.object_nbytes
        if slots < 1:
            return
        self.slots, self.object_nbytes = max(self.slots, slots), max(self.object_nbytes, int(trace.object_nbytes))
        self.ops = max(self.ops, len(trace.ops))
        self.ops_run += len(trace.ops)
        self.key_list = max(self.key_list, keys.longest)
        self.keys = max(self.keys, keys.distinct)
        self.keys_over_slots = max(self.keys_over_slots, keys.distinct / slots)

    def state(self, state: State) -> None:
        if state.refs:
            self.pins = max(self.pins, max(count for _, count in state.refs))

    def phase(self, name: str, traces: int, seconds: float, ops: int, **more: float) -> None:
        """Record a phase: its traces and ops, and their rates (a phase run in
        parts, as the background one is, adds up)."""
        if name in self.phases:
            before = self.phases[name]
            traces, ops = traces + int(before["traces"]), ops + int(before["ops"])
            seconds += float(before["seconds"])
        rate = 1 / seconds if seconds > 0 else 0.0
        figures = {"traces": traces, "ops": ops, "seconds": round(seconds, 1)}
        figures.update(traces_per_s=round(traces * rate), ops_per_s=round(ops * rate), **more)
        self.phases[name] = figures

    def short_of(self) -> list[str]:
        """The dimensions this run did not take as far as ``SCOPE``."""
        reached = {name: getattr(self, name) for name in SCOPE}
        short = [f"{name} {reached[name]:g} < {most}" for name, most in SCOPE.items() if reached[name] < most]
        return short + self.depth_short

    def as_json(self) -> dict[str, object]:
        shown = {name: getattr(self, name) for name in ("slots", "object_nbytes", "keys", "ops", "pins", "key_list")}
        shown["keys_over_slots"] = round(self.keys_over_slots, 2)
        if self.queue:
            shown["queue"] = self.queue
        return {**shown, "phases": self.phases, "not_reached": self.short_of(), "domain": self.domain.as_json()}


def _judge(trace: Trace, target: Target, reach: Reach | None, every: int = 1) -> Divergence | None:
    """``compare``, recording what the trace reaches."""
    if reach is None:
        return compare(trace, target, every=every)
    reach.trace(trace)
    return compare(trace, target, reach.state, every=every)


def _unknown(found: Divergence | None, known: frozenset[str]) -> Divergence | None:
    """``found``, unless it falls under a deviation in ``known`` (one a
    ``--keep-going`` run has recorded already)."""
    return found if found is not None and found.deviation not in known else None


def replay(vector: traces.Vector, target: Target) -> Divergence | None:
    """Replay a vector's trace; its recorded expectations must match the spec's
    (``auxspec vectors --check`` proves that) and the target must match both."""
    return compare(vector.trace, target)


def replay_file(vector: traces.VectorFile, target: Target) -> Divergence | None:
    """``replay`` of a vector file, its ops streamed from the file: memory
    does not grow with its length.

    raises: TraceError (the file changed since it was surveyed)"""
    return compare_stream(vector.head(), vector.ops(), target, vector.prefix, vector.steps)


def explore(
    target: Target,
    profile: str,
    max_time: float,
    seed: int | None = None,
    progress: Callable[[int, float], None] | None = None,
    round_size: int = 300,
    known: frozenset[str] = frozenset(),
    reach: Reach | None = None,
    max_traces: int | None = None,
) -> tuple[Divergence | None, int]:
    """Search for a divergence for about ``max_time`` seconds, or (given
    ``max_traces``) until that many traces are tried, ``max_time`` then only
    a cap: a count budget tries the same traces on any machine. Return the
    shrunk divergence (or None) and how many traces were tried. Divergences
    that fall under a deviation in ``known`` do not count."""
    started = time.monotonic()
    deadline = started + max_time
    tried = 0
    ops_before = reach.ops_run if reach is not None else 0
    most = math.inf if max_traces is None else max_traces

    def spent() -> bool:
        return tried >= most or time.monotonic() > deadline

    def judge(data: bytes, trace: Trace | None = None) -> Divergence | None:
        nonlocal tried
        tried += 1
        if progress and tried % 2000 == 0:
            progress(tried, max(deadline - time.monotonic(), 0.0))
        trace = decode(data, profile, target.features) if trace is None else trace
        return _unknown(_judge(trace, target, reach), known)

    def judge_again(data: bytes) -> Divergence | None:  # a shrink candidate: not a trace the search explored
        return _unknown(compare(decode(data, profile, target.features), target), known)

    rng = Random(seed)
    steered = _Guided(target, profile, Random(rng.getrandbits(64)), known) if PYTHON in target.features else None

    def record() -> None:
        """The scope report's "random" and "guided" rows: each its own
        traces, ops and seconds (the guided turns run between random rounds)."""
        if reach is None:
            return
        guided_traces, guided_seconds = (steered.tried, steered.seconds) if steered is not None else (0, 0.0)
        seconds = time.monotonic() - started - guided_seconds
        reach.phase("random", tried - guided_traces, seconds, reach.ops_run - ops_before)
        if steered is not None:
            steered.record(reach)

    for data in SIZE_SWEEP:  # every class of store sizes once, not left to the draw
        if (swept := judge(data)) is not None:
            record()
            return swept, tried
    if steered is not None and max_traces is not None:
        steered.inputs = GUIDED_INPUTS  # turns of a count, not of seconds
    rounds = 0
    while not spent():
        if steered is not None and rounds % GUIDED_EVERY == GUIDED_EVERY - 1:
            rounds += 1
            before = steered.tried
            hit = steered.turn(min(GUIDED_TURN, deadline - time.monotonic()))
            tried += steered.tried - before
            if hit is not None:
                record()
                return hit, tried
            continue
        # Rounds alternate the classic scope (small stores, short traces) and
        # the scaled one (swarm configurations, sizes across scales, long
        # traces), each round from its own random stream.
        scope = SCOPES[rounds % GUIDED_EVERY % 2 if steered is not None else rounds % 2]
        rounds += 1
        stream = Random(rng.getrandbits(64))
        # Each input is drawn and decoded one ahead, so a target that
        # pipelines (a port process) is sent the next trace while this one is
        # judged; the inputs, and their order, are the same either way.
        data = scope.draw(stream)
        trace = decode(data, profile, target.features)
        for number in range(round_size):
            if spent():
                break
            current, current_trace = data, trace
            if number + 1 < round_size:
                data = scope.draw(stream)
                trace = decode(data, profile, target.features)
                if target.upcoming is not None:
                    target.upcoming(trace)
            found = judge(current, current_trace)
            if found is not None:
                if target.upcoming is not None:
                    target.upcoming(None)
                data = current
                left = _shrink_budget(None if max_traces is None else SHRINK_INPUTS)
                data, found = shrink_input(data, found, judge_again, left)
                # Run once more for the report; a target that now agrees (its
                # answers depend on its history, as a port process's may) is
                # reported as it failed.
                again = judge_again(data)
                record()
                return again if again is not None else found, tried
    record()
    return None, tried


# Every fifth round of explore is a guided turn (the four before it: two
# of each scope), which keeps the random rounds at about a third of the
# search's time: as much as when their inputs cost twice as much.
GUIDED_EVERY = 5
GUIDED_TURN = 3.0  # seconds of the coverage-guided search per turn
GUIDED_INPUTS = 600  # inputs per guided turn under a count budget (--max-traces): half the random rounds' 1,200
SHRINK_SECONDS = 10.0  # seconds the search may spend cutting the input it found
SHRINK_INPUTS = 2000  # or, under a count budget, the inputs it may try
SCOPES = (inputs.CLASSIC, inputs.SCALED_SCOPE)  # the random rounds' scopes, in turn


def _shrink_budget(inputs_left: int | None) -> Callable[[], bool]:
    """Whether an input shrink may try one more candidate: ``SHRINK_SECONDS``
    from now, and ``inputs_left`` candidates when a count budget runs."""
    deadline = time.monotonic() + SHRINK_SECONDS
    count = [0]

    def left() -> bool:
        count[0] += 1
        return time.monotonic() < deadline and (inputs_left is None or count[0] <= inputs_left)

    return left


def shrink_input(
    data: bytes, found: Divergence, judge: Callable[[bytes], Divergence | None], left: Callable[[], bool]
) -> tuple[bytes, Divergence]:
    """The search's first pass over an input that diverges: cut runs of bytes
    while it still diverges (halving the run when no cut works), while
    ``left()``. A shorter input decodes to a shorter trace; the report's
    shrink (``drivers.shrink``) then works on the trace."""
    best, chunk = data, max(len(data) // 2, 1)
    while chunk >= 1 and left():
        at, cut = 0, False
        while at < len(best) and left():
            candidate = best[:at] + best[at + chunk :]
            again = judge(candidate) if candidate else None
            if again is not None:
                best, found, cut = candidate, again, True
            else:
                at += chunk
        if not cut:
            chunk //= 2
    return best, found


def traced_calls(target: Target, arcs: guided.Arcs | guided.CoverageArcs) -> Target:
    """``target`` as the guided phase drives it: its building and its op
    calls traced by ``arcs`` (inside ``with arcs:``), the compare's own work
    (the spec's steps, snapshots, invariants) not."""
    return replace(target, factory=arcs.around(target.factory), invoke=arcs.around(target.invoke or invoke))


class _Guided:
    """The coverage-guided search for a Python target (``generators.guided``):
    the target's own arcs decide which codec inputs are kept and mutated;
    each input is decoded by the one codec and judged by the one compare."""

    def __init__(
        self,
        target: Target,
        profile: str,
        rng: Random,
        known: frozenset[str],
        arcs: guided.Arcs | guided.CoverageArcs | None = None,
    ) -> None:
        self.target, self.profile, self.rng, self.known = target, profile, rng, known
        self.arcs = arcs or guided.target_arcs()
        self.traced = traced_calls(target, self.arcs)
        self.corpus = guided.Corpus(rng)
        self.tried = self.ops = 0
        self.seconds = 0.0
        self.inputs: int | None = None  # a turn's count budget; None: a turn is timed

    def _judge(self, data: bytes) -> Divergence | None:
        trace = decode(data, self.profile, self.target.features)
        self.tried += 1
        self.ops += len(trace.ops)
        with self.arcs:
            return _unknown(compare(trace, self.traced), self.known)

    def turn(self, seconds: float) -> Divergence | None:
        """Search for ``seconds``; a shrunk divergence, or None."""
        started = time.monotonic()
        deadline = started + seconds
        last = math.inf if self.inputs is None else self.tried + self.inputs
        try:
            if not self.corpus.inputs:  # seeds: a few inputs of each scope
                seeds = []
                for index in range(8):
                    first = self.rng.randrange(SCALED, SPECIAL_SIZES) if index % 2 else self.rng.randrange(SCALED)
                    size = 1024 if index % 2 else 64
                    seeds.append(bytes([first]) + self.rng.randbytes(size))
                    found = self._keep(seeds[-1])
                    if found is not None:
                        return found
                if not self.corpus.inputs:  # no arc of the target's recorded (its files are an installed package's)
                    for seed in seeds:  # mutate the seeds, unguided
                        self.corpus.add(seed)
            while time.monotonic() < deadline and self.tried < last:
                found = self._keep(self.corpus.next())
                if found is not None:
                    return found
            return None
        finally:
            self.seconds += time.monotonic() - started

    def _keep(self, data: bytes) -> Divergence | None:
        before = self.arcs.fresh
        found = self._judge(data)
        if found is not None:
            return shrink_input(data, found, self._judge, _shrink_budget(self.inputs and SHRINK_INPUTS))[1]
        if self.arcs.fresh > before:
            self.corpus.add(data)
        return None

    def record(self, reach: Reach | None) -> None:
        if reach is not None and self.tried:  # a run too short for a turn has no guided phase to report
            arcs = self.arcs.count
            reach.phase("guided", self.tried, self.seconds, self.ops, corpus=len(self.corpus.inputs), arcs=arcs)


def exhaust(
    target: Target,
    profile: str,
    max_time: float | None = None,
    known: frozenset[str] = frozenset(),
    reach: Reach | None = None,
) -> tuple[Divergence | None, exhaustive.Scope]:
    """Every trace of the small scope of ``generators.exhaustive`` (those the
    target's features allow): the first divergence (shortest first, so
    already small) and what was covered. The scope is a fixed count of
    traces, so it completes on any machine; ``max_time`` (None: no cap) is
    only for callers that must bound it."""
    scope = exhaustive.Scope()
    deadline = math.inf if max_time is None else time.monotonic() + max_time
    traces = exhaustive.traces(profile, scope=scope)
    following = next(traces, None)

    def cut_short() -> exhaustive.Scope:  # the trace drawn ahead was not judged: the scope says so
        scope.traces -= following is not None
        scope.complete = False
        return scope

    while following is not None:
        trace, following = following, next(traces, None)
        if time.monotonic() > deadline:
            return None, cut_short()
        # Every op's outcome, and the whole state after the last op only: the
        # scope holds every prefix of each trace as a trace of its own, so the
        # state after every op is still compared, once (a divergence is then
        # replayed op by op, as compare does). A port process answers a third
        # fewer requests, and is sent the next trace while this one is judged.
        if target.upcoming is not None:
            target.upcoming(following, max(len(following.ops), 1) if following is not None else 1)
        found = _unknown(_judge(trace, target, reach, every=max(len(trace.ops), 1)), known)
        if found is not None:
            if target.upcoming is not None:
                target.upcoming(None)
            return found, cut_short()
    return None, scope


@dataclass(frozen=True)
class BackgroundFound:
    """A background scenario the target's store ran in a way the background
    spec does not allow, and the driver's report of how."""

    scenario: Scenario
    violation: str


def background_fails(target: Target) -> Callable[[Scenario], str | None]:
    """How a background scenario is judged: the violation's report, or None."""

    def fails(scenario: Scenario) -> str | None:
        try:
            gated.run_scenario(target, scenario)
        except gated.Violation as violation:
            return str(violation)
        return None

    return fails


def shrink_background(
    found: BackgroundFound, target: Target, tries: int = shrink.TRIES, seconds: float = shrink.SECONDS
) -> shrink.Shrunk[Scenario]:
    """``found``'s scenario shrunk call by call, its writer schedule with it."""
    return shrink.shrink_scenario(found.scenario, found.violation, background_fails(target), tries, seconds)


def shrink_divergence(
    divergence: Divergence,
    target: Target,
    known: frozenset[str] = frozenset(),
    tries: int = shrink.TRIES,
    seconds: float = shrink.SECONDS,
    fresh: Callable[[], tuple[Target, Callable[[], None]]] | None = None,
) -> shrink.Shrunk[Trace]:
    """``divergence``'s trace shrunk op by op (``drivers.shrink``): a
    candidate counts when it diverges in the same class, a documented
    deviation of the same name, or no deviation and none of ``known``.

    A port process that crashed, hung or answered garbage may have done so
    for its own history (its nth request), which a candidate run in the same
    process does not repeat: given ``fresh`` (a new port process and how to
    stop it), each candidate runs in a process of its own and counts when the
    port breaks on it too, within ``BROKEN_TRIES`` and ``BROKEN_SECONDS`` (a
    hung port costs a timeout per try); the trace is first run once so in a
    fresh process, and kept as it was when the port does not break on it
    there (or when there is no ``fresh``)."""
    wanted = divergence.deviation

    def fails(trace: Trace) -> Divergence | None:
        if not fits_protocol(trace, target):
            return None  # a port process could not take its lines: no candidate
        try:
            found = judge(trace, target)
        except PortBroken:
            return None
        if found is None or found.deviation != wanted or (wanted is None and found.deviation in known):
            return None
        return found

    def cut(trace: Trace, found: Divergence) -> Trace:
        return replace(trace, ops=trace.ops[: found.step + 1])

    full = replace(divergence.trace, ops=divergence.trace.ops[: divergence.step + 1])
    if divergence.steps is not None:  # streamed from a vector: its ops up to the step are at hand
        divergence = replace(divergence, steps=None)
    if divergence.actual.startswith(BROKE):
        if fresh is None:
            return shrink.Shrunk(full, divergence, 0, "skipped")
        breaks = broken_in_fresh_process(fresh)
        again = breaks(full)
        if again is None:  # it broke for its history, not for this trace: kept as found
            return shrink.Shrunk(full, divergence, 1, "skipped")
        tries, seconds = min(tries, BROKEN_TRIES), min(seconds, BROKEN_SECONDS)
        shrunk = shrink.shrink_trace(full, again, breaks, cut, tries, seconds)
        return replace(shrunk, tries=shrunk.tries + 1)
    # A deep trace's calls are the depth phase's (valid, int sizes): its state before a call can be rebuilt.
    rebuild = depth_phase.rebuilt if is_deep(full) else None
    shrunk = shrink.shrink_trace(
        full, divergence, fails, cut, tries, seconds, None if is_large(full) else outcome_kinds, rebuild
    )
    if is_deep(full) and not is_deep(shrunk.value):
        # Judged on the in-place spec while it was deep; now small enough for
        # the model itself, op by op, so the report names the first op that
        # differs with the state before it.
        precise = fails(shrunk.value)
        if precise is not None:
            return replace(shrunk, value=cut(shrunk.value, precise), failure=precise)
    return shrunk


def judge(trace: Trace, target: Target) -> Divergence | None:
    """The one compare of a counterexample and its shrink candidates: a deep
    trace on the in-place spec (``judge_long``), a large store's as the
    large-store phase judges it (``is_large``), any other precisely."""
    if is_deep(trace):
        return judge_long(trace, target)
    if is_large(trace):
        return compare(trace, target, every=len(trace.ops) + 1, replay=False)
    return compare(trace, target)


LARGE_STORE = 1 << 26  # a store of this many bytes or more is judged without a snapshot per op
LARGE_TRIES = 40  # shrink candidates of a large-store catch: each replays a store of hundreds of MB
LARGE_SECONDS = 180.0  # and the cap on them: at default size one takes a few seconds (a minute at 2.2 GB)


def fits_protocol(trace: Trace, target: Target) -> bool:
    """Whether a port process can take ``trace`` (always, in process): a
    large store's shrink candidate joins calls, and a call whose objects (a
    put's, or a get's answer) pass the protocol's line in hex would break
    the port where the catch did not."""
    if PYTHON in target.features or not is_large(trace) or type(trace.object_nbytes) is not int:
        return True
    most = (traces.MAX_LINE - (1 << 16)) // (2 * trace.object_nbytes)  # objects a line holds in hex
    return all(sum(1 for _ in shrink.keys_of(op)) <= most for op in trace.ops)


def is_large(trace: Trace) -> bool:
    """Whether ``trace``'s store is one of the large-store phase's: judged
    with the outcome of every op and the whole state at the end, no
    snapshot per op (each would copy the store)."""
    return type(trace.max_bytes) is int and trace.max_bytes >= LARGE_STORE


LONG_TRACE = 2_000  # a trace longer than this (a deep one) is judged on the in-place spec, not the model
LONG_EVERY = 1_024  # ops between its whole-state comparisons


DEEP_COST = 4_000_000  # ops x slots past which a trace is judged on the in-place spec (drivers.depth's PRECISE_COST)


def is_deep(trace: Trace) -> bool:
    """Whether ``trace`` is judged as a deep one (the depth phase's): longer
    than ``LONG_TRACE``, or its ops times its slots past ``DEEP_COST`` (a
    few calls on a store of 75,000 slots: the model copies the store at
    every op), over int sizes (all the in-place spec takes)."""
    sizes = trace.max_bytes, trace.object_nbytes
    if type(sizes[0]) is not int or type(sizes[1]) is not int or sizes[1] < 1:
        return False
    return len(trace.ops) > LONG_TRACE or len(trace.ops) * max(sizes[0] // sizes[1], 1) > DEEP_COST


def judge_long(trace: Trace, target: Target) -> Divergence | None:
    """A deep trace compared as the depth phase does (``drivers.depth``): on
    the model's semantics stepped in place (``models.incremental``, O(call)),
    every op's outcome, the whole state every ``LONG_EVERY`` ops and after the
    last. The spec's state before the op is the in-place one, so it is
    dropped (no deviation is judged on it)."""
    found = compare(trace, target, every=LONG_EVERY, replay=False, semantics=incremental)
    if found is not None and found.step > 0 and type(trace.max_bytes) is int and type(trace.object_nbytes) is int:
        # Found at a checkpoint: the state may have gone wrong up to LONG_EVERY ops before. Again
        # up to there, the whole state after each op of the stretch before it (as many as cost
        # DEEP_COST at most), so the report, and a shrink's cut, start at the op that differs.
        slots = max(trace.max_bytes // max(trace.object_nbytes, 1), 1)
        stretch = min(LONG_EVERY, max(DEEP_COST // slots, 1))
        upto = replace(trace, ops=trace.ops[: found.step + 1])
        exact = compare(
            upto, target, every=LONG_EVERY, replay=False, semantics=incremental, exact_from=found.step - stretch
        )
        found = exact or found
    return None if found is None else replace(found, before=None)


def expected_outcomes_of(trace: Trace) -> tuple[Outcome, ...]:
    """The spec's outcome of each op of ``trace``, for its vector: the model's,
    or for a deep trace (``is_deep``) the in-place spec's, which costs each op
    its own size (the model's would copy the store at every op: minutes for a
    vector of 100,000 calls)."""
    if not is_deep(trace):
        return tuple(outcome for outcome, _ in expected_outcomes(trace))
    return tuple(depth_phase.spec_outcomes(trace))


def outcome_kinds(trace: Trace) -> tuple[object, ...]:
    """The kind of the spec's outcome of each op of ``trace`` (ok, or the
    error's kind): which calls the shrinker may join (``shrink._all_merged``)."""
    return tuple("ok" if isinstance(outcome, Ok) else outcome.kind for outcome in expected_outcomes_of(trace))


BROKEN_TRIES = 40  # candidates a crashed, hung or garbled port's trace may try, each in a process of its own
BROKEN_SECONDS = 60.0  # and the time they may take (a hung port costs its --op-timeout per try)


def broken_in_fresh_process(
    fresh: Callable[[], tuple[Target, Callable[[], None]]],
) -> Callable[[Trace], Divergence | None]:
    """How a trace is judged when the port broke on it: run in a port
    process started for it alone, its divergence when the port breaks on it
    again (crashes, hangs, answers garbage), else None."""

    def breaks(trace: Trace) -> Divergence | None:
        try:
            target, stop = fresh()
        except PortBroken:
            return None
        try:
            found = compare(trace, target)
        except PortBroken:  # it broke before answering anything: not this trace's doing
            return None
        finally:
            stop()
        return found if found is not None and found.actual.startswith(BROKE) else None

    return breaks


BROKE = "the port broke"  # how engine.compare words a port process that crashed, hung or broke the protocol


def explore_background(
    target: Target,
    profile: str,
    max_time: float,
    seed: int | None = None,
    progress: Callable[[int, float], None] | None = None,
    reach: Reach | None = None,
    max_scenarios: int | None = None,
) -> tuple[BackgroundFound | None, int]:
    """Search the target's background store for a schedule the background
    spec does not allow (the writer held at a gate, as the background fuzzer
    does, with the same decoding); the scenario that violated it with the
    violation's report (Hypothesis-shrunk over bytes; ``shrink_background``
    shrinks it further, call by call), or None, and how many scenarios were
    tried. Rounds alternate the fuzzer's scope
    (bounds 1-3, short scenarios) and the scaled one
    (``scaled_background_scenario``: bounds up to 64, queues filled, faults
    at any batch index, long scenarios). ``max_scenarios``: a count budget,
    ``max_time`` then only a cap."""
    assert target.background is not None and target.observe is not None
    started = time.monotonic()
    deadline = started + max_time
    tried = ops = 0
    most = math.inf if max_scenarios is None else max_scenarios

    def spent() -> bool:
        return tried >= most or time.monotonic() > deadline

    scopes: tuple[Callable[[bytes, str], Scenario], ...] = (background_scenario, scaled_background_scenario)
    scope = scopes[0]
    # As in explore: past the deadline only inputs found to violate still do,
    # and a timing-dependent one that passes on a second run is reported as it failed.
    failing: dict[bytes, BackgroundFound] = {}

    def violates(data: bytes) -> bool:
        nonlocal tried, ops
        if spent():
            return data in failing
        tried += 1
        if progress and tried % 50 == 0:
            progress(tried, max(deadline - time.monotonic(), 0.0))
        scenario = scope(data, profile)
        ops += len(scenario.ops)
        if reach is not None and isinstance(scenario.max_pending_batches, int):
            reach.queue = max(reach.queue, scenario.max_pending_batches)
        try:
            gated.run_scenario(target, scenario)
        except gated.Violation as violation:
            failing[data] = BackgroundFound(scenario, str(violation))
            return True
        return False

    # Rounds of about the same time: a scaled scenario runs up to 200 owner
    # calls, many of them waiting on a full queue, so its rounds are shorter.
    configs = [
        settings(
            max_examples=examples,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
            phases=[Phase.generate, Phase.shrink],
        )
        for examples in (50, 6)
    ]
    # Scaled inputs of 1-4 KiB: Hypothesis draws a binary near its least size.
    strategies = (st.binary(max_size=200), st.binary(min_size=1024, max_size=4096))
    rng = Random(seed)
    rounds = 0
    found_report: BackgroundFound | None = None
    while not spent():
        scope, strategy, config = scopes[rounds % 2], strategies[rounds % 2], configs[rounds % 2]
        rounds += 1
        failing.clear()
        try:
            found = find(strategy, violates, settings=config, random=Random(rng.getrandbits(64)))
        except NoSuchExample:
            continue
        except Flaky:  # a schedule that failed once and then passed: the smallest that failed
            found = min(failing, key=lambda data: (len(data), data))
        # Every input find() returns was recorded when it failed: its report is
        # at hand (running it again would wait out the same gate timeouts).
        found_report = failing[found]
        break
    if reach is not None:
        reach.phase("background", tried, time.monotonic() - started, ops)
    return found_report, tried


# ------------------------------------------------------------------ depth

DEPTH_MIN_TIME = 15.0  # --depth auto runs the phase from this --max-time on (the default 30 s run has it)
DEPTH_SHARE = 0.5  # of --max-time, the most the phase's lives may take (its shrinking comes on top)


def explore_depth(
    target: Target, profile: str, seed: int, max_time: float, known: frozenset[str], reach: Reach | None = None
) -> depth_phase.DepthRun:
    """The depth phase (``drivers.depth``), its figures recorded in ``reach``
    (the ``depth`` phase line; the goals it left short in ``not_reached``)."""
    run = depth_phase.explore_depth(target, profile, seed, max_time, known)
    if reach is not None:
        reach.phase("depth", run.lives, run.seconds, run.ops, **run.depth.as_json())
        background = target.background is not None and target.observe is not None
        found = run.divergence is not None or run.violation is not None
        reach.depth_short = [] if found else run.depth.short_of(target.features, background)
    return run


# ------------------------------------------------------- background exit

# The exit check's bounds. Starting an interpreter, importing the target and
# running a four-line script takes well under a second; 60 s leaves room for a
# machine loaded by other runs. Once the script has ended, an interpreter whose
# writer lets it go exits in milliseconds; one held by a writer never does, so
# any bound tells them apart: 10 s is a thousand times the need, and short
# enough that a run that finds the hang is not much longer for it.
EXIT_START_SECONDS = 60.0
EXIT_SECONDS = 10.0
_EXIT_MARK = "auxspec-exit-check: script ended"
_EXIT_LOAD_FAILED = 3  # the child's status when it cannot load the target or it has no background store

# The child: the target loaded by the string verify got, with this process's
# sys.path (so it imports the same way), a background store put to and left
# open, held by a module global, then the end of the script.
_EXIT_SCRIPT = f"""
import json, sys
sys.path[:] = json.loads(sys.argv[2])
from auxspec.engine.calls import BlockObject
from auxspec.engine.target import load_target
try:
    target = load_target(sys.argv[1] or None)
    if target.background is None:
        raise LookupError("it has no background store class")
except Exception as error:
    print(f"cannot load {{sys.argv[1] or 'auxstore'}}: {{error}}", file=sys.stderr)
    sys.exit({_EXIT_LOAD_FAILED})
STORE = target.background(target.factory(256, 64), max_pending_batches=2)
STORE.put([BlockObject("a", bytes(64))])
STORE.put([BlockObject("b", bytes(range(64)))])
print({_EXIT_MARK!r}, flush=True)
"""


@dataclass(frozen=True)
class ExitCheck:
    """What the background exit check saw: how long the child took, and
    ``violation`` (the program did not exit, or failed) or ``error`` (it could
    not load the target, so nothing was checked), or neither."""

    seconds: float
    status: int | None  # the child's exit status; None when it was killed
    violation: str | None = None
    error: str | None = None

    def as_json(self) -> dict[str, object]:
        shown: dict[str, object] = {"seconds": round(self.seconds, 2), "status": self.status}
        if self.violation is not None:
            shown["violation"] = self.violation
        if self.error is not None:
            shown["error"] = self.error
        return shown


def check_background_exit(
    spec: str | None, start_seconds: float = EXIT_START_SECONDS, exit_seconds: float = EXIT_SECONDS
) -> ExitCheck:
    """Run a child interpreter that loads the target named ``spec`` (as
    ``load_target`` takes it), puts two batches to a background store and
    ends its script without closing it, the store still held by a module
    global; the interpreter must then exit, with status 0 (the design's
    writer is a daemon: an open store does not hold the program). Only the
    exit is judged, not how the port gets it. A child past a bound is
    killed."""
    started = time.monotonic()
    ended = threading.Event()
    with tempfile.TemporaryFile(mode="w+") as errors:
        child = subprocess.Popen(
            [sys.executable, "-c", _EXIT_SCRIPT, spec or "", json.dumps(sys.path)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
        )

        def watch(stdout: IO[str]) -> None:
            for line in stdout:
                if line.strip() == _EXIT_MARK:
                    ended.set()

        assert child.stdout is not None
        reader = threading.Thread(target=watch, args=(child.stdout,), name="auxspec-exit-check", daemon=True)
        reader.start()
        status: int | None = None
        try:
            while not ended.wait(0.02) and child.poll() is None:
                if time.monotonic() - started > start_seconds:
                    raise subprocess.TimeoutExpired(child.args, start_seconds)
            status = child.wait(timeout=exit_seconds)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        # A grandchild the port started may hold the pipe open: not waited for.
        reader.join(timeout=1.0)
        if not reader.is_alive():
            child.stdout.close()
        errors.seek(0)
        said = errors.read().strip().splitlines()
    seconds = time.monotonic() - started
    tail = f": {' / '.join(said[-3:])}" if said else ""
    if status is None and ended.is_set():
        violation = (
            f"a Python program that leaves a background store open did not exit within {exit_seconds:g} s "
            "of its script's end: its writer holds the interpreter's exit (DESIGN: a daemon writer)"
        )
        return ExitCheck(seconds, None, violation=violation)
    if status is None:
        violation = (
            f"a Python program that builds a background store and puts two batches did not reach its "
            f"script's end within {start_seconds:g} s (not an exit hang){tail}"
        )
        return ExitCheck(seconds, None, violation=violation)
    if status == _EXIT_LOAD_FAILED and not ended.is_set():
        return ExitCheck(seconds, status, error=f"a child interpreter could not load the target{tail}")
    if status != 0 or not ended.is_set():
        where = "after its script's end" if ended.is_set() else "before its script's end"
        violation = (
            f"a Python program that leaves a background store open exited with status {status} {where} "
            f"(not an exit hang){tail}"
        )
        return ExitCheck(seconds, status, violation=violation)
    return ExitCheck(seconds, status)


# ------------------------------------------------------------ large stores

LARGE_MIN_TIME = 10.0  # --large-stores auto runs the phase from this --max-time on
WATCH_SECONDS = 120.0  # a large trace taking longer is the port's failure
WATCH_RSS_GROWTH = 8 << 30  # so is one making this process's memory grow by more


@dataclass
class LargeRun:
    """What the large-store phase did: the divergence (or None) and the
    trace it was found in, and the traces, ops and seconds it took."""

    divergence: Divergence | None
    trace: str | None
    traces: int
    ops: int
    seconds: float


def explore_large(
    target: Target,
    profile: str,
    seed: int,
    known: frozenset[str] = frozenset(),
    reach: Reach | None = None,
    watch_seconds: float = WATCH_SECONDS,
    watch_rss: int = WATCH_RSS_GROWTH,
    where: large.Geometry | None = None,
) -> LargeRun:
    """The traces of ``generators.large`` over ``where`` (``large.DEFAULT_BYTES``
    when None; 2.2 GB puts objects across 2^30 and 2^31) on the spec and the target: every op's outcome is
    compared, and the whole state after the last op (the trace reads back
    every payload before it closes the store); there is no snapshot after
    every op, nor a replay taking one (each would copy the 2.2 GB).
    A trace that runs longer than ``watch_seconds`` or makes this process's
    memory grow by more than ``watch_rss`` bytes is stopped and reported as
    a divergence at the op it was in. A port process is not timed as a
    whole: its 2.2 GB travel as hex, which takes minutes on a loaded
    machine, and each of its calls has the protocol's own timeout
    (``--op-timeout``), which reports a hang at its op. Divergences under a
    deviation in ``known`` do not count."""
    if PYTHON not in target.features:
        watch_seconds = math.inf
    started = time.monotonic()
    tried = ops = 0
    found: Divergence | None = None
    name: str | None = None
    for made in large.traces(profile, target.features, seed, where):
        trace = made.build()
        tried, ops = tried + 1, ops + len(trace.ops)
        reached = [0]  # the ops the spec has stepped: the one running is the last

        def count(_: State, reached: list[int] = reached) -> None:
            reached[0] += 1

        try:
            with _Watchdog(watch_seconds, watch_rss):
                found = compare(trace, target, count, every=len(trace.ops) + 1, replay=False)
        except _Overrun as overrun:
            step = max(reached[0] - 1, -1)
            found = Divergence(trace, step, "the call returns (the watchdog's limits)", f"stopped: {overrun}")
        del trace  # its payloads go before the next trace's are made
        found = _unknown(found, known)
        if found is not None:
            name = made.name
            break
    seconds = time.monotonic() - started
    if reach is not None:
        reach.phase("large", tried, seconds, ops)
    return LargeRun(found, name, tried, ops, seconds)


class _Overrun(BaseException):
    """Raised in the main thread by ``_Watchdog``: a BaseException, so a
    port's ``except Exception`` and the compare loop let it through."""


class _Watchdog:
    """Stops the block it guards (a trace on a port) when it runs longer
    than ``seconds`` or this process's resident memory grows by more than
    ``rss`` bytes: a thread watches, and a signal (SIGUSR2) makes the main
    thread raise ``_Overrun`` at its next Python instruction. A port stuck
    inside one C call is stopped when that call returns; off the main thread
    (no handler can be set) or without SIGUSR2 the limits are not enforced."""

    POLL = 0.05

    def __init__(self, seconds: float, rss: int) -> None:
        self.seconds, self.rss = seconds, rss
        self.reason: str | None = None
        self.signal = getattr(signal, "SIGUSR2", None)
        self.interrupts = self.signal is not None and threading.current_thread() is threading.main_thread()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._watch, name="auxspec-large-watchdog", daemon=True)
        self.previous: Any = None

    def __enter__(self) -> _Watchdog:
        if self.interrupts:
            self.previous = signal.signal(self.signal, self._raise)  # type: ignore[arg-type]
        self.base, self.started = _rss(), time.monotonic()
        self.target = threading.main_thread().ident
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()
        if self.interrupts:
            signal.signal(self.signal, self.previous)  # type: ignore[arg-type]

    def _watch(self) -> None:
        while not self.stop.wait(self.POLL):
            grown = _rss() - self.base
            if grown > self.rss:
                self.reason = f"its memory grew by {grown / 2**30:.1f} GiB (the limit is {self.rss / 2**30:.0f} GiB)"
            elif time.monotonic() - self.started > self.seconds:
                self.reason = f"the trace ran longer than {self.seconds:.0f} s"
            if self.reason is not None:
                if self.interrupts and self.target is not None:
                    signal.pthread_kill(self.target, self.signal)  # type: ignore[arg-type]
                return

    def _raise(self, signum: int, frame: object) -> None:
        if self.reason is not None:
            raise _Overrun(self.reason)


def _rss() -> int:
    """This process's resident memory in bytes (0 where /proc is not there)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


# ----------------------------------------------------------------- targets


def exec_target(command: str, op_timeout: float = 5.0) -> tuple[Target, Callable[[], None]]:
    """A port process speaking the protocol, with the features its handshake
    declared (``drivers.protocol.process_target``), and how to stop it."""
    made = process_target(command, op_timeout)
    return made.target, made.close


def load_vectors(paths: Iterable[Path]) -> list[traces.Vector]:
    vectors: list[traces.Vector] = []
    for path in paths:
        vectors.extend(traces.load(file) for file in _vector_files(path))
    return vectors


def survey_vectors(paths: Iterable[Path]) -> list[traces.VectorFile]:
    """The vector files under ``paths``, each checked and counted, none held (``traces.survey``)."""
    return [traces.survey(file) for path in paths for file in _vector_files(path)]


def _vector_files(path: Path) -> list[Path]:
    return sorted(path.rglob("*.jsonl")) if path.is_dir() else [path]


@contextlib.contextmanager
def hypothesis_scratch() -> Iterator[None]:
    """Hypothesis' own files (the example database is off, but it caches the
    constants it finds in modules under its home directory, ``.hypothesis/``
    where the command runs) go to a temporary directory removed afterwards,
    unless ``HYPOTHESIS_STORAGE_DIRECTORY`` names one: a verify leaves
    nothing behind where it runs."""
    if os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY"):
        yield
        return
    with tempfile.TemporaryDirectory(prefix="auxspec-hypothesis-") as scratch:
        configuration.set_hypothesis_home_dir(scratch)
        try:
            yield
        finally:
            configuration.set_hypothesis_home_dir(None)
