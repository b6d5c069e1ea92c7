"""``models.incremental`` (the depth phase's in-place spec) against the model:
the same outcome and the same whole state (stored keys in order, payloads,
counts, closed, counters) after every op, on the codec's traces (both
scopes, both profiles, invalid inputs included) and on small depth lives
(``generators.depth`` at a small scale: long histories, pins at the old end,
failures of every kind)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from auxspec.engine.codec import SCALED, SPECIAL_SIZES, decode
from auxspec.engine.expect import initial_state
from auxspec.engine.ops import Get, Put, Stats, Trace
from auxspec.engine.table import step
from auxspec.generators import depth
from auxspec.models import incremental
from auxspec.models import sequential as model
from auxspec.models.sequential import Err, Ok


def _agree(trace: Trace) -> int:
    """Step both over ``trace``; assert they agree after every op. The ops stepped."""
    want = initial_state(trace)
    got = initial_state(trace, incremental)
    if isinstance(want, Err):
        assert got == want
        return 0
    assert isinstance(got, incremental.Live)
    for number, op in enumerate(trace.ops, 1):
        try:
            want, want_outcome = step(want, op)
        except model.UndefinedInput:
            return number - 1  # the upstream model leaves it undefined; no generator sends it
        got, got_outcome = step(got, op, incremental)
        where = f"op {number}: {op}"
        assert got_outcome == want_outcome, where
        assert got.entries == want.entries, where
        assert got.refs == want.refs, where
        assert got.closed == want.closed, where
        assert got.counters == want.counters, where
        assert not model.violations(got), where  # type: ignore[arg-type]
    return len(trace.ops)


@settings(max_examples=400, deadline=None)
@given(st.binary(min_size=4, max_size=256), st.sampled_from(model.PROFILES))
def test_agrees_with_the_model_on_classic_traces(data: bytes, profile: str) -> None:
    _agree(decode(data, profile))


@settings(max_examples=150, deadline=None)
@given(st.integers(SCALED, SPECIAL_SIZES - 1), st.binary(min_size=256, max_size=4096), st.sampled_from(model.PROFILES))
def test_agrees_with_the_model_on_scaled_traces(first: int, data: bytes, profile: str) -> None:
    _agree(decode(bytes([first]) + data, profile))


def test_agrees_with_the_model_on_small_depth_lives() -> None:
    stepped = 0
    for seed in range(6):
        for profile in model.PROFILES:
            for plan in depth.lives(profile, depth.ALL_FEATURES, seed, scale=depth.SMALL):
                stepped += _agree(plan.build().trace)
    assert stepped > 10_000  # long enough to hold every rare path many times


def test_pinned_keys_at_the_old_end_cost_no_scan() -> None:
    """Many pinned keys at the least-recent end: a put that evicts pops only
    stale or pinned entries once, then the victims (the model scans them all
    on every put)."""
    live = incremental.new(10_000, 1, "strict")
    assert isinstance(live, incremental.Live)
    pinned = tuple(f"p{i}" for i in range(5_000))
    incremental.put(live, tuple((k, b"p") for k in pinned), retain=pinned)
    for i in range(20_000):
        _, outcome = incremental.put(live, ((f"n{i}", b"n"),))
        assert outcome == Ok()
    assert len(live.heap) <= 2 * len(live.order) + 64  # stale entries are dropped, not kept
    assert live.pinned_stored == 5_000 and live.evictions == 20_000 - 5_000
    _, outcome = step(live, Get(pinned[:3]), incremental)
    assert outcome == Ok(b"ppp")
    _, shown = step(live, Stats(), incremental)
    assert isinstance(shown, Ok) and isinstance(shown.value, model.Stats) and shown.value.pinned == 5_000


def test_a_strict_capacity_failure_changes_nothing() -> None:
    live = incremental.new(3, 1, "strict")
    assert isinstance(live, incremental.Live)
    step(live, Put((("a", b"a"),), ("a",)), incremental)
    step(live, Put((("b", b"b"), ("c", b"c")), ("b",)), incremental)
    before = (live.entries, live.refs)
    _, outcome = step(live, Put((("d", b"d"), ("e", b"e")), ("x", "c"), ("a",)), incremental)
    assert outcome == Err(model.Kind.CAPACITY)  # a's release makes room for one, c's pin takes one
    assert (live.entries, live.refs) == before and live.capacity_failures == 1
