"""The background model itself: its invariant and the rules of DESIGN.md's
"Background store", checked on random interleavings of owner calls and
writer steps; and ReferenceBackgroundStore in both profiles."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from auxspec import ReferenceBackgroundStore, ReferenceStore
from auxspec.checks.contracts import Checked
from auxspec.models import background as bg
from auxspec.models import sequential as model
from auxspec.models.sequential import Err, Kind, Ok
from auxstore import BlockObject, BlockObjectStoreError, UnreferencedKeyError

PROFILES = ("strict", "upstream")


def start(profile: str, capacity: int = 2, bound: int = 2) -> bg.BgState:
    inner = model.new(capacity * 2, 2, profile)
    assert isinstance(inner, model.State)
    state = bg.new_background(inner, bound)
    assert isinstance(state, bg.BgState)
    return state


def batch(*keys: str, retain: tuple[str, ...] = (), release: tuple[str, ...] = ()) -> bg.Batch:
    return bg.Batch(tuple((k, k.encode() * 2) for k in keys), retain, release)


steps = st.lists(
    st.one_of(
        st.tuples(
            st.just("put"),
            st.builds(
                bg.Batch,
                st.lists(st.tuples(st.sampled_from("abc"), st.just(b"xy")), max_size=3).map(tuple),
                st.lists(st.sampled_from("abc"), max_size=2).map(tuple),
                st.lists(st.sampled_from("abc"), max_size=2).map(tuple),
            ),
        ),
        st.tuples(st.sampled_from(["take", "step", "step", "get", "flush", "close"]), st.none()),
    ),
    max_size=25,
)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(PROFILES), st.integers(1, 3), st.integers(1, 3), steps, st.randoms(use_true_random=False))
def test_random_interleavings_keep_the_invariant_and_the_rules(
    profile: str, capacity: int, bound: int, ops: list[tuple[str, Any]], rnd: Any
) -> None:
    state = start(profile, capacity, bound)
    applied: list[bg.Batch] = []  # what the writer handed to the inner store, in order
    queued: list[bg.Batch] = []  # every batch accepted into the queue, in order
    for name, argument in ops:
        before = state
        if name == "put":
            alternatives = bg.put(state, argument)
            if not alternatives:
                # Backpressure exactly when `bound` batches wait unstarted.
                assert len(state.queue) - state.started == bound
                continue
            if len(alternatives) > 1:  # in flight: the only choice is Ok or the failure
                assert {type(o) for _, o in alternatives} == {Ok, bg.Latched}
            state, outcome = rnd.choice(alternatives)
            if state.queue != before.queue and outcome == Ok():
                queued.append(argument)
            if before.seen and before.error is not None:
                assert outcome == bg.Latched(before.error) or argument.empty or before.closed
        elif name == "take":
            if state.queue and not state.started:
                state = bg.writer_take(state)
        elif name == "step":
            if state.queue:
                applied.append(state.queue[0])
                state = bg.writer_step(state)
        else:
            call = {"get": lambda s: bg.get_concatenated(s, ("a",)), "flush": bg.flush, "close": bg.close}[name]
            pending = bg.drain(state)
            state, outcome = call(state)
            # Draining calls always report a latched failure (strict: unless closed).
            if pending.error is not None and not (before.closed and (profile == "strict" or name == "close")):
                assert outcome == bg.Latched(pending.error)
            assert not state.queue
        assert bg.check_background(state), bg.background_violations(state)
        assert len(state.queue) <= bound + 1  # outstanding, counting the one being applied
    # FIFO: the final inner state is the batches applied in order, until the first failure.
    final = bg.drain(state)
    assert final.applied == state.applied + bg.inner_calls_to_drain(state)
    # Dropped (strict): what is queued is applied, then the inner store closed; a closed store stays as it is.
    if profile == "strict":
        dropped = CHECKED.drop(state)
        assert dropped.closed and dropped.inner.closed and not dropped.queue
        if state.closed:
            assert dropped is state
        else:
            assert dropped.applied == final.applied and dropped.inner == model.close(final.inner)[0]
    else:
        with pytest.raises(model.UndefinedInput):
            bg.drop(state)


CHECKED = Checked(bg)  # the model's steps with their pre:/post: lines evaluated


def test_a_drop_applies_the_queue_up_to_a_failure_and_reports_it_to_no_one() -> None:
    state = start("strict", capacity=1, bound=3)
    for keys in (("a",), ("b", "c"), ("d",)):  # the second fails (capacity 1): the third is skipped
        (state, _), *_ = bg.put(state, batch(*keys))
    dropped = CHECKED.drop(state)
    assert dropped.error == "capacity" and not dropped.seen  # latched, and no caller is left to hear of it
    drained = bg.drain(state)
    assert model.stored_keys(drained.inner) == ("a",)
    assert dropped.applied == 2 and dropped.inner == model.close(drained.inner)[0]
    closed, outcome = bg.close(dropped)  # the model's close of a dropped store changes nothing
    assert (closed, outcome) == (dropped, Ok())


@pytest.mark.parametrize("profile", PROFILES)
def test_fifo_order_decides_eviction(profile: str) -> None:
    state = start(profile, capacity=2, bound=3)
    for keys in (("a",), ("b",), ("c",)):
        (state, _), *_ = bg.put(state, batch(*keys))
    drained = bg.drain(state)
    assert model.stored_keys(drained.inner) == ("b", "c")


@pytest.mark.parametrize("profile", PROFILES)
def test_a_failure_is_latched_skips_the_rest_and_may_be_in_flight(profile: str) -> None:
    state = start(profile, capacity=1, bound=3)
    (state, _), *_ = bg.put(state, batch("a", "b"))  # capacity failure when applied
    # Queued behind a failing batch: the writer may fail during the call.
    alternatives = bg.put(state, batch("c"))
    assert [o for _, o in alternatives] == [Ok(), bg.Latched("capacity")]
    state = alternatives[0][0]
    state = bg.writer_step(state)
    assert state.error == "capacity" and state.queue == ()  # c is skipped
    # Latched but not reported yet: a put may or may not see it.
    assert [o for _, o in bg.put(state, batch("d"))] == [Ok(), bg.Latched("capacity")]
    flushed, outcome = bg.flush(state)
    assert outcome == bg.Latched("capacity") and flushed.seen
    # Reported: every later put sees it.
    assert [o for _, o in bg.put(flushed, batch("d"))] == [bg.Latched("capacity")]
    closed, outcome = bg.close(flushed)
    assert outcome == bg.Latched("capacity")
    assert bg.close(closed) == (closed, Ok())  # raised once
    assert bg.put(closed, bg.Batch()) == ((closed, Ok()),)  # empty put after close
    expected = Err(Kind.CLOSED) if profile == "strict" else bg.Latched("capacity")
    assert bg.get_concatenated(closed, ())[1] == expected


def test_strict_rejects_bad_input_at_the_call_and_upstream_leaves_it_undefined() -> None:
    bad = bg.Batch((("a", b"toolong"),))
    state = start("strict")
    assert bg.put(state, bad) == ((state, Err(Kind.PAYLOAD)),)
    with pytest.raises(model.UndefinedInput):
        bg.put(start("upstream"), bad)


def test_bounds_per_profile() -> None:
    inner = model.new(4, 2, "strict")
    upstream = model.new(4, 2, "upstream")
    assert isinstance(inner, model.State) and isinstance(upstream, model.State)
    assert bg.new_background(inner, 0) == Err(Kind.CONFIG)
    assert bg.new_background(inner, model.Invalid()) == Err(Kind.TYPE)
    unbounded = bg.new_background(upstream, 0)
    assert isinstance(unbounded, bg.BgState) and unbounded.max_pending_batches is None
    for _ in range(10):
        ((unbounded, _),) = bg.put(unbounded, batch("a"))
    assert len(unbounded.queue) == 10


def test_invariant_catches_broken_states() -> None:
    state = start("strict")
    assert not bg.check_background(replace(state, started=True))
    assert not bg.check_background(replace(state, error="capacity", queue=(batch("a"),)))
    assert not bg.check_background(replace(state, seen=True))
    assert not bg.check_background(replace(state, queue=(batch("a"),) * 3))


# ------------------------------------------------------- ReferenceBackgroundStore


def objects(*keys: str) -> list[BlockObject]:
    return [BlockObject(k, k.encode() * 2) for k in keys]


@pytest.mark.parametrize("profile", PROFILES)
def test_reference_eager_reports_its_own_failure(profile: str) -> None:
    store = ReferenceBackgroundStore({"max_bytes": 2, "object_nbytes": 2}, max_pending_batches=1, profile=profile)
    store.put(objects("a"))
    assert store.get_concatenated(["a"]) == b"aa"
    with pytest.raises(BlockObjectStoreError) as raised:
        store.put([], release_keys=["nobody"])
    cause = raised.value.__cause__
    assert isinstance(cause, UnreferencedKeyError if profile == "strict" else KeyError)
    with pytest.raises(BlockObjectStoreError) as again:
        store.put(objects("b"))
    assert again.value.__cause__ is cause  # the same latched failure
    with pytest.raises(BlockObjectStoreError):
        store.close()
    store.close()


def test_reference_lazy_runs_the_writer_on_demand() -> None:
    inner = ReferenceStore(max_bytes=4, object_nbytes=2)
    store = ReferenceBackgroundStore(inner, max_pending_batches=1, eager=False)
    store.put(objects("a"))
    store.put(objects("b"))  # the queue holds one: the writer applied a first
    assert store.pending == 1 and store.snapshot().entries == (("a", b"aa"),)
    store.put([], release_keys=["nobody"])  # the writer applied b to make room; this waits
    assert store.pending == 1 and store.state.applied == 2
    store.put(objects("c"))  # room is made by applying the release, which fails: c is skipped
    assert store.pending == 0 and store.state.error == "unreferenced" and not store.state.seen
    with pytest.raises(BlockObjectStoreError):
        store.flush()
    assert [k for k, _ in store.snapshot().entries] == ["a", "b"]
    with pytest.raises(ValueError):
        ReferenceBackgroundStore(inner, max_pending_batches=1, profile="upstream")


def test_reference_extensions() -> None:
    with ReferenceBackgroundStore({"max_bytes": 6, "object_nbytes": 2}, max_pending_batches=2) as store:
        store.put(objects("a", "b"), retain_keys=["a"])
        buffer = bytearray(4)
        assert store.read_into(["b", "a"], buffer) == 4 and bytes(buffer) == b"bbaa"
        assert len(store) == 2 and "a" in store
        stats = store.stats()
        assert (stats.stored, stats.pinned, stats.hits) == (2, 1, 2)
    with pytest.raises(RuntimeError):
        len(store)
