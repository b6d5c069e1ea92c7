"""The models' contracts have teeth, and the models keep them.

Written for the mutants of ``spec/auxspec/models`` that the fast suite let
through (docs/mutation.md). Two kinds of check:

- every step of a small, exhaustive space of states and inputs is run with
  its ``pre:``/``post:`` lines evaluated (``auxspec.checks.contracts``), so a
  slip in a step or a contract that rejects a correct result fails here, not
  only under CrossHair in ``make verify``;
- each contract helper is handed results that are wrong in exactly the way it
  is there to catch (a reference count off, two keys swapped, a counter not
  advanced, a failure with no cause) and must reject them: a weakened
  contract still holds on the correct model, so only wrong results show it.

The background model is explored breadth first from small stores, with every
owner call and writer step checked the same way, and the (writer, call,
outcome) cells it reaches must be exactly the transition table's.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import replace

import pytest

from auxspec.checks.contracts import Checked
from auxspec.models import background as bg
from auxspec.models import sequential as model
from auxspec.models.background import Batch, BgState, Latched, OwnerCall, Result, Writer
from auxspec.models.sequential import Counters, Err, Invalid, Kind, Ok, State, Stats, UndefinedInput

PROFILES = model.PROFILES
STEPS = Checked(model)
BG_STEPS = Checked(bg)
COUNTERS = Counters(hits=1, misses=2, evictions=3, capacity_failures=4)  # distinct, so a mix-up shows

# ---------------------------------------------------------------- sequential


def _state(profile: str, capacity: int, keys: tuple[str, ...], refs: dict[str, int]) -> State:
    """One-byte objects whose payload is the key's letter, stored in ``keys``' order."""
    return State(
        profile=profile,
        capacity=capacity,
        object_nbytes=1,
        entries=tuple((k, k.encode()) for k in keys),
        refs=tuple(sorted(refs.items())),
        counters=COUNTERS,
    )


def _states() -> Iterator[State]:
    """Every order of up to ``capacity`` of a, b, c, under a few pin sets
    (one on a key never stored), capacities 1 to 3, both profiles."""
    for profile in PROFILES:
        for capacity in (1, 2, 3):
            for size in range(capacity + 1):
                for keys in itertools.permutations("abc", size):
                    for refs in ({}, {"a": 1}, {"b": 2, "d": 1}):
                        yield _state(profile, capacity, keys, refs)


STATES = list(_states())
OBJECTS: tuple[tuple[model.Item, ...], ...] = (
    (),
    (("a", b"A"),),
    (("d", b"D"),),
    (("a", b"A"), ("d", b"D")),
    (("d", b"D"), ("d", b"E")),  # a repeated key: first position, last payload
    (("c", b"C"), ("e", b"E")),
)
RETAINS: tuple[tuple[str, ...], ...] = ((), ("a",), ("d",))
RELEASES: tuple[tuple[str, ...], ...] = ((), ("a",), ("b",), ("a", "a"), ("d",))


def _wrong_entries(entries: tuple[tuple[str, bytes], ...]) -> list[tuple[tuple[str, bytes], ...]]:
    """``entries`` changed in order, in a payload, and in length."""
    wrong = [entries[:-1]] if entries else []
    if len(entries) >= 2:
        wrong.append((entries[1], entries[0], *entries[2:]))
    wrong += [tuple((k, b"?" if i == j else p) for j, (k, p) in enumerate(entries)) for i in range(len(entries))]
    return wrong


def _wrong_counters(c: Counters) -> list[Counters]:
    """``c`` with one of its counts one higher."""
    return [
        replace(c, hits=c.hits + 1),
        replace(c, misses=c.misses + 1),
        replace(c, evictions=c.evictions + 1),
        replace(c, capacity_failures=c.capacity_failures + 1),
    ]


def _put_cases() -> Iterator[tuple[State, tuple[model.Item, ...], tuple[str, ...], tuple[str, ...]]]:
    for state in STATES:
        for objects, retain, release in itertools.product(OBJECTS, RETAINS, RELEASES):
            yield state, objects, retain, release


def test_every_put_of_the_small_space_keeps_its_contracts_and_they_reject_wrong_results() -> None:
    outcomes: set[object] = set()
    for old, objects, retain, release in _put_cases():
        result = STEPS.put(old, objects, retain, release)  # every post: line holds
        new, outcome = result
        outcomes.add(outcome)
        args = (old, objects, retain, release)
        if new.refs != (("z", 1),):
            wrong_refs = replace(new, refs=(*new.refs, ("z", 1)))
            counted_pins = isinstance(outcome, Ok) or (outcome == Err(Kind.CAPACITY) and old.profile == "upstream")
            assert model._counts_follow_pins(old, retain, release, (wrong_refs, outcome)) != counted_pins
        for counters in _wrong_counters(new.counters):
            assert not model._put_is_counted(old, objects, (replace(new, counters=counters), outcome))
        stored_pins = [k for k in model.stored_keys(new) if k in dict(new.refs) and k in dict(old.entries)]
        for key in stored_pins:
            dropped = replace(new, entries=tuple(e for e in new.entries if e[0] != key))
            assert not model._pinned_keys_survive(old, dropped)
        if isinstance(outcome, Ok):
            for entries in _wrong_entries(new.entries):
                assert not model._successful_put_is_exact(*args, (replace(new, entries=entries), outcome))
            for kind in (Kind.UNREFERENCED, Kind.CAPACITY, Kind.MISSING, Kind.BUFFER, Kind.CONFIG):
                assert not model._failures_are_justified(*args, (new, Err(kind)))
            continue
        assert isinstance(outcome, Err)
        if old.profile == "strict":
            assert new == old
            changed = replace(old, refs=(*old.refs, ("z", 1)))
            assert not model._strict_failure_changes_nothing(old, (changed, outcome))
        else:
            assert model._strict_failure_changes_nothing(old, (replace(old, closed=True), outcome))
        if outcome.kind == Kind.UNREFERENCED:
            # Retained once more each, no release goes below zero.
            assert not model._failures_are_justified(old, objects, retain + release, release, result)
        else:
            assert outcome.kind == Kind.CAPACITY
            assert not model._failures_are_justified(replace(old, capacity=10), objects, retain, release, result)
            assert not model._put_is_counted(old, objects, (replace(new, counters=old.counters), outcome))
    # The space reaches every outcome of put.
    assert outcomes == {Ok(), Err(Kind.UNREFERENCED), Err(Kind.CAPACITY)}


@pytest.mark.parametrize("profile", PROFILES)
def test_invalid_and_closed_puts_keep_their_contracts(profile: str) -> None:
    state = _state(profile, 2, ("a", "b"), {"a": 1})
    closed, _ = STEPS.close(state)
    assert STEPS.put(closed, (("a", b"A"),)) == (closed, Err(Kind.CLOSED))
    invalid: list[tuple[tuple[model.Item, ...], tuple[model.KeyArg, ...], tuple[model.KeyArg, ...], Kind]] = [
        (((Invalid(), b"A"),), (), (), Kind.TYPE),
        ((("a", Invalid()),), (), (), Kind.TYPE),
        ((("a", b"AA"),), (), (), Kind.PAYLOAD),
        ((), (Invalid(),), (), Kind.TYPE),
        ((), (), (Invalid(),), Kind.TYPE),
        ((("a", b"A"),), ("a",), ("z", Invalid()), Kind.TYPE),  # type beats over-release
    ]
    for objects, retain, release, kind in invalid:
        if profile == "upstream":
            with pytest.raises(UndefinedInput, match=r"^upstream takes str keys and exact-length bytes only$"):
                STEPS.put(state, objects, retain, release)
        else:
            assert STEPS.put(state, objects, retain, release) == (state, Err(kind))


READ_KEYS: tuple[tuple[str, ...], ...] = ((), ("a",), ("b", "a"), ("b", "a", "b"), ("d",), ("a", "d"))


def test_every_read_of_the_small_space_keeps_its_contracts_and_they_reject_wrong_results() -> None:
    outcomes: set[object] = set()
    for old in STATES:
        for keys, buffer in itertools.product(READ_KEYS, (None, 0, 1, 2, 3)):
            result = STEPS.get_concatenated(old, keys) if buffer is None else STEPS.read_into(old, keys, buffer)
            new, outcome = result
            outcomes.add(type(outcome) if isinstance(outcome, Ok) else outcome)
            assert not model._read_is_exact(old, keys, buffer, (replace(new, refs=(("z", 1),)), outcome))
            for counters in _wrong_counters(new.counters):
                assert not model._read_is_exact(old, keys, buffer, (replace(new, counters=counters), outcome))
            if isinstance(outcome, Err):
                if outcome.kind == Kind.MISSING:
                    assert not model._read_is_exact(old, keys, buffer, (replace(new, counters=old.counters), outcome))
                    assert not model._read_is_exact(old, keys, buffer, (new, Err(Kind.BUFFER)))
                else:
                    assert outcome.kind == Kind.BUFFER
                    assert not model._read_is_exact(old, keys, 100, result)
                continue
            assert isinstance(outcome.value, bytes)
            assert not model._read_is_exact(old, keys, buffer, (new, Ok(outcome.value + b"?")))
            assert not model._read_is_exact(old, keys, buffer, (new, Err(Kind.MISSING)))
            assert not model._read_is_exact(old, keys, buffer, (new, Err(Kind.BUFFER)))
            for entries in _wrong_entries(new.entries):
                assert not model._read_is_exact(old, keys, buffer, (replace(new, entries=entries), outcome))
    assert outcomes == {Ok, Err(Kind.MISSING), Err(Kind.BUFFER)}


@pytest.mark.parametrize("profile", PROFILES)
def test_invalid_and_closed_reads_keep_their_contracts(profile: str) -> None:
    state = _state(profile, 2, ("a", "b"), {})
    for keys, buffer in [((Invalid(),), None), (("a", Invalid()), 2), (("a",), Invalid())]:
        if profile == "upstream":
            with pytest.raises(UndefinedInput, match=r"^upstream reads str keys into writable buffers only$"):
                STEPS.read_into(state, keys, buffer) if buffer is not None else STEPS.get_concatenated(state, keys)
        elif buffer is None:
            assert STEPS.get_concatenated(state, keys) == (state, Err(Kind.TYPE))
        else:
            assert STEPS.read_into(state, keys, buffer) == (state, Err(Kind.TYPE))
    closed, _ = STEPS.close(state)
    assert STEPS.get_concatenated(closed, ("a",)) == (closed, Err(Kind.CLOSED))
    assert STEPS.read_into(closed, ("a",), 8) == (closed, Err(Kind.CLOSED))


def test_observations_keep_their_contracts_and_stats_are_exact() -> None:
    for state in STATES:
        assert STEPS.flush(state) == (state, Ok())
        assert STEPS.length(state) == (state, Ok(len(state.entries)))
        for key in ("a", "d", Invalid()):
            stored = isinstance(key, str) and key in dict(state.entries)
            assert STEPS.contains(state, key) == (state, Ok(stored))
        _, reported = STEPS.stats(state)
        assert isinstance(reported, Ok) and isinstance(reported.value, Stats)
        right = reported.value
        assert right.pinned == sum(1 for k in model.stored_keys(state) if k in dict(state.refs))
        for field in ("stored", "capacity", "pinned", "hits", "misses", "evictions", "capacity_failures"):
            wrong = replace(right, **{field: getattr(right, field) + 1})
            assert not model._stats_are_exact(state, Ok(wrong))
        closed, outcome = STEPS.close(state)
        assert outcome == Ok() and closed.closed and not closed.entries and not closed.refs
        for call in (STEPS.flush, STEPS.length, STEPS.stats):
            assert call(closed) == (closed, Err(Kind.CLOSED))
        assert STEPS.contains(closed, "a") == (closed, Err(Kind.CLOSED))


def test_terminal_order_is_the_order_of_the_releases_that_reach_zero() -> None:
    old = _state("strict", 3, ("a", "b", "c"), {"a": 1, "b": 2, "c": 1})
    assert model._terminal_order(old, ("d",), ("c", "b", "d", "b", "a")) == ["c", "d", "b", "a"]
    assert model._terminal_order(old, ("a",), ("a",)) == []
    assert model._expected_counts(old, ("a", "d"), ("b", "c")) == {"a": 2, "b": 1, "d": 1}


def test_the_invariant_names_each_broken_rule_in_one_line() -> None:
    good = _state("strict", 2, ("a", "b"), {"a": 1})
    assert model.violations(good) == []
    broken = {
        "unknown profile 'lenient'": replace(good, profile="lenient"),
        "capacity 0 < 1": replace(good, capacity=0, entries=()),
        "object_nbytes 0 < 1": replace(good, object_nbytes=0, entries=()),
        "2 stored > capacity 1": replace(good, capacity=1),
        "a key is stored twice": replace(good, entries=(("a", b"a"), ("a", b"a"))),
        "payload of 'b' is not 1 bytes": replace(good, entries=(("a", b"a"), ("b", b"bb"))),
        "reference keys are not unique and sorted": replace(good, refs=(("b", 1), ("a", 1))),
        "a reference count is below 1": replace(good, refs=(("a", 0),)),
        "a closed store still holds data": replace(good, closed=True),
        "a counter is negative": replace(good, counters=Counters(misses=-1)),
    }
    for line, state in broken.items():
        assert model.violations(state) == [line]


# ---------------------------------------------------------------- background

_BATCHES = (
    Batch(),
    Batch((("a", b"v"),)),
    Batch((("b", b"v"),), ("b",)),
    Batch((), (), ("b",)),  # fails unless b holds a reference
    Batch((("a", b"v"), ("c", b"w")), ("a", "c")),  # two pinned keys: fails at capacity 1
)
_INVALID = Batch((("a", b"too long"),))


def _starts() -> Iterator[BgState]:
    for profile in PROFILES:
        inner = model.new(1, 1, profile)
        assert isinstance(inner, State)
        for bound, faults in itertools.product((1, 2), ((), (0,), (1,))):
            state = bg.new_background(inner, bound, faults)
            assert isinstance(state, BgState)
            yield state
        unbounded = bg.new_background(inner, 0)
        if profile == "upstream":
            assert isinstance(unbounded, BgState) and unbounded.max_pending_batches is None
        else:
            assert unbounded == Err(Kind.CONFIG)


def _owner_calls(state: BgState) -> Iterator[tuple[OwnerCall, object, BgState]]:
    """Each owner call from ``state``, checked: (call, outcome or None for a wait, state after)."""
    batches = _BATCHES + ((_INVALID,) if state.profile == "strict" else ())
    for batch in batches:
        call = bg.put_call(state, batch)
        alternatives = BG_STEPS.put(state, batch)
        if not alternatives:
            yield call, None, state
        for after, outcome in alternatives:
            yield call, outcome, after
        if alternatives and alternatives[0][1] == Ok() and state.error is None and not batch.empty:
            queued = alternatives[0][0]
            assert not bg._ok_put_queues_the_batch(state, batch, ((replace(queued, queue=state.queue), Ok()),))
            assert not bg._ok_put_queues_the_batch(
                state, batch, ((replace(queued, queue=(*state.queue, batch, batch)), Ok()),)
            )
    for read in (
        lambda s: BG_STEPS.get_concatenated(s, ("a",)),
        lambda s: BG_STEPS.read_into(s, ("a", "b"), 1),
        BG_STEPS.flush,
        BG_STEPS.observe_inner,
    ):
        after, outcome = read(state)
        yield OwnerCall.WAIT, outcome, after
    after, outcome = BG_STEPS.enter(state)
    yield OwnerCall.ENTER, outcome, after
    after, outcome = BG_STEPS.close(state)
    yield OwnerCall.CLOSE, outcome, after


def _explore(limit: int = 3000) -> tuple[set[BgState], set[tuple[str, Writer, OwnerCall, Result]]]:
    seen_states: set[BgState] = set()
    cells: set[tuple[str, Writer, OwnerCall, Result]] = set()
    frontier = list(_starts())
    while frontier and len(seen_states) < limit:
        state = frontier.pop(0)
        if state in seen_states:
            continue
        seen_states.add(state)
        writer = bg.writer_of(state)
        nexts: list[BgState] = []
        if state.queue and not state.started:
            nexts.append(BG_STEPS.writer_take(state))
        if state.queue:
            nexts.append(BG_STEPS.writer_step(state))
            drained = BG_STEPS.drain(state)
            assert bg.inner_calls_to_drain(state) == drained.applied - state.applied
        for call, outcome, after in _owner_calls(state):
            cells.add((state.profile, writer, call, bg.result_of(call, outcome)))  # type: ignore[arg-type]
            nexts.append(after)
        frontier += [s for s in nexts if s not in seen_states]
    return seen_states, cells


def test_the_background_model_keeps_its_contracts_and_reaches_every_cell_of_its_table() -> None:
    states, cells = _explore()
    assert len(states) > 200
    listed = {(p, w, c, r) for p in PROFILES for (w, c), results in bg.TRANSITIONS[p].items() for r in results}
    assert cells == listed


def _bg(profile: str = "strict", bound: int = 1, **changes: object) -> BgState:
    inner = model.new(2, 1, profile)
    assert isinstance(inner, State)
    state = bg.new_background(inner, bound)
    assert isinstance(state, BgState)
    return replace(state, **changes)  # type: ignore[arg-type]


A = Batch((("a", b"v"),))
OVER = Batch((), (), ("b",))


def test_where_the_writer_stands() -> None:
    assert bg.writer_of(_bg()) is Writer.IDLE
    assert bg.writer_of(_bg(queue=(A,))) is Writer.QUEUED
    assert bg.writer_of(_bg(queue=(A, OVER), bound=2)) is Writer.FAILING
    assert bg.writer_of(_bg(error="capacity")) is Writer.LATCHED
    assert bg.writer_of(_bg(error="capacity", seen=True)) is Writer.REPORTED
    closed = model.close(_bg().inner)[0]
    assert bg.writer_of(_bg(inner=closed, closed=True)) is Writer.CLOSED
    assert bg.writer_of(_bg(inner=closed, closed=True, error="fault", seen=True)) is Writer.CLOSED_FAILED


def test_the_table_is_enforced_for_every_outcome_given() -> None:
    idle = _bg()
    assert bg.allowed(idle, OwnerCall.PUT, [Ok(), Latched("capacity")])
    assert not bg.allowed(idle, OwnerCall.PUT, [Ok(), None])  # an idle writer never makes a put wait
    assert not bg.allowed(idle, OwnerCall.PUT, [None, Ok()])
    assert not bg.allowed(idle, OwnerCall.WAIT, [Latched("capacity")])
    assert not bg.allowed(idle, OwnerCall.CLOSE, [Latched("capacity")])
    assert bg.allowed(_bg(queue=(A,)), OwnerCall.PUT, [None])
    reported = _bg(error="capacity", seen=True)
    assert not bg.allowed(reported, OwnerCall.PUT, [Ok()])
    assert not bg.allowed(reported, OwnerCall.WAIT, [Ok(b"")])
    assert bg.allowed(reported, OwnerCall.WAIT, [Latched("capacity")])
    assert not bg._put_allowed(idle, A, ())  # a put that waits from an idle writer
    assert bg._put_allowed(_bg(queue=(A,)), A, ())


def test_outcomes_are_classed_by_call() -> None:
    assert bg.result_of(OwnerCall.PUT, None) is Result.WAITS
    assert bg.result_of(OwnerCall.PUT, Latched("fault")) is Result.LATCHED
    assert bg.result_of(OwnerCall.WAIT, Err(Kind.CLOSED)) is Result.CLOSED
    assert bg.result_of(OwnerCall.WAIT, Err(Kind.MISSING)) is Result.INNER
    assert bg.result_of(OwnerCall.WAIT, Ok(b"x")) is Result.INNER
    assert bg.result_of(OwnerCall.PUT_INVALID, Err(Kind.TYPE)) is Result.INVALID
    assert bg.result_of(OwnerCall.PUT, Ok()) is Result.OK
    assert bg.put_call(_bg(), Batch()) is OwnerCall.PUT_EMPTY
    assert bg.put_call(_bg(), Batch((), ("a",))) is OwnerCall.PUT
    assert bg.put_call(_bg(), _INVALID) is OwnerCall.PUT_INVALID


def test_a_put_gives_exactly_the_alternatives_the_writer_allows() -> None:
    # No room: the put waits.
    full = _bg(queue=(A,))
    assert bg.put(full, A) == ()
    assert bg.put(replace(full, started=True), A) == ((replace(full, started=True, queue=(A, A)), Ok()),)
    # Its own batch fails: Ok (not yet applied) or the failure, reported.
    queued, failed = bg.put(_bg(), OVER)
    assert queued == (_bg(queue=(OVER,)), Ok())
    assert failed[1] == Latched("unreferenced")
    assert failed[0] == replace(bg.drain(_bg(queue=(OVER,))), seen=True)
    assert failed[0].applied == 1 and failed[0].queue == ()
    # A latched failure not yet reported may or may not be seen; once reported, always.
    latched = _bg(error="capacity")
    assert bg.put(latched, A) == ((latched, Ok()), (replace(latched, seen=True), Latched("capacity")))
    assert bg.put(replace(latched, seen=True), A) == ((replace(latched, seen=True), Latched("capacity")),)
    assert bg.put(latched, Batch()) == ((latched, Ok()),)


def test_the_writer_applies_fails_and_skips() -> None:
    state = _bg(bound=2, queue=(A, Batch((("b", b"w"),))))
    taken = bg.writer_take(state)
    assert taken == replace(state, started=True)
    stepped = bg.writer_step(taken)
    assert stepped.queue == state.queue[1:] and not stepped.started and stepped.applied == 1
    assert model.stored_keys(stepped.inner) == ("a",)
    assert bg.drain(state).applied == 2 and model.stored_keys(bg.drain(state).inner) == ("a", "b")
    # An injected fault at inner call 0: the inner store is untouched and the rest is skipped.
    faulty = replace(state, faults=frozenset({0}))
    assert bg.writer_step(faulty) == replace(faulty, queue=(), applied=1, error=bg.FAULT)
    assert bg.inner_calls_to_drain(faulty) == 1
    assert bg._run_to_failure(state) is None
    second = replace(state, faults=frozenset({1}))
    assert bg._run_to_failure(second) == replace(
        second, inner=bg.writer_step(state).inner, queue=(), applied=2, error=bg.FAULT
    )
    assert bg.has_room(_bg(bound=1, queue=(A,), started=True))
    assert not bg.has_room(_bg(bound=2, queue=(A, A)))
    assert bg.has_room(_bg("upstream", max_pending_batches=None, queue=(A,) * 5))


def test_waiting_calls_and_close_report_a_failure_once() -> None:
    failing = _bg(queue=(OVER,))
    after, outcome = bg.flush(failing)
    assert outcome == Latched("unreferenced") and after.seen and after.queue == () and after.applied == 1
    closed, outcome = bg.close(failing)
    assert outcome == Latched("unreferenced") and closed.closed and closed.inner.closed and closed.seen
    assert bg.close(closed) == (closed, Ok())
    assert bg.flush(closed) == (closed, Err(Kind.CLOSED))  # strict: closed wins
    upstream_closed, _ = bg.close(_bg("upstream", queue=(OVER,)))
    assert bg.flush(upstream_closed)[1] == Latched("unreferenced")  # upstream: the latch wins
    clean, outcome = bg.close(_bg(queue=(A,)))
    assert outcome == Ok() and model.stored_keys(clean.inner) == () and clean.applied == 1
    assert bg.flush(clean) == (clean, Err(Kind.CLOSED))
    assert bg.enter(clean) == (clean, Err(Kind.CLOSED))
    read, value = bg.get_concatenated(_bg(queue=(A,)), ("a",))
    assert value == Ok(b"v") and read.queue == () and read.applied == 1


def test_construction_checks_its_arguments() -> None:
    strict = model.new(2, 1, "strict")
    upstream = model.new(2, 1, "upstream")
    assert isinstance(strict, State) and isinstance(upstream, State)
    assert bg.new_background(Invalid(), 1) == Err(Kind.TYPE)
    assert bg.new_background(strict, Invalid()) == Err(Kind.TYPE)
    with pytest.raises(UndefinedInput, match=r"^upstream takes an int max_pending_batches only$"):
        bg.new_background(upstream, Invalid())
    with pytest.raises(UndefinedInput, match=r"^upstream takes str keys and exact-length bytes only$"):
        bg.put(BgState(upstream, 1), _INVALID)
    with pytest.raises(UndefinedInput, match=r"^upstream takes int sizes only$"):
        model.new(Invalid(), 1, "upstream")
    assert bg.new_background(strict, 0) == Err(Kind.CONFIG)
    assert bg.new_background(upstream, -1) == BgState(inner=upstream, max_pending_batches=None)
    assert bg.new_background(strict, 3, [2]) == BgState(inner=strict, max_pending_batches=3, faults=frozenset({2}))
    closed = model.close(strict)[0]
    assert bg.new_background(closed, 1) == BgState(inner=closed, max_pending_batches=1, closed=True)


def test_the_background_invariant_names_each_broken_rule() -> None:
    good = _bg()
    assert bg.background_violations(good) == []
    # Each broken rule, and the one line the invariant reports for it.
    broken = {
        "inner: capacity 0 < 1": replace(good, inner=replace(good.inner, capacity=0)),
        "only the upstream profile has an unbounded queue": replace(good, max_pending_batches=None),
        "max_pending_batches 0 < 1": replace(good, max_pending_batches=0),
        "2 batches wait unstarted > max_pending_batches 1": replace(good, queue=(A, A)),
        "the writer took a batch from an empty queue": replace(good, started=True),
        "batches are queued behind a latched failure (they must be skipped)": replace(
            good, error="capacity", queue=(A,)
        ),
        "a failure was reported but none is latched": replace(good, seen=True),
        "a closed background store still has batches or an open inner store": replace(good, closed=True),
        "negative inner call index": replace(good, applied=-1),
        "an invalid batch was queued under strict": replace(good, queue=(_INVALID,)),
    }
    for line, state in broken.items():
        assert bg.background_violations(state) == [line]
    assert bg.background_violations(replace(good, faults=frozenset({-1}))) == ["negative inner call index"]
    # The count is of the batches not yet taken: the head the writer took is not one.
    taken = replace(good, queue=(A, A, A), started=True)
    assert bg.background_violations(taken) == ["2 batches wait unstarted > max_pending_batches 1"]
    assert len(bg.background_violations(replace(good, seen=True, started=True))) == 2
    upstream = _bg("upstream")
    assert bg.check_background(replace(upstream, max_pending_batches=None, queue=(A,) * 3))
    assert bg.check_background(replace(upstream, queue=(_INVALID,)))  # upstream queues what it is given
    assert bg.check_background(replace(good, queue=(A, A), started=True))
