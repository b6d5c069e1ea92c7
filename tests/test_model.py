"""Unit tests of the model's steps, one group per rule of DESIGN.md's semantics.

States are small and written out by hand: one-byte objects whose payload is
the key's own letter (so ``"abc"`` is ``a``, ``b``, ``c`` stored, least recent
first), and every expected state is spelled out in full.
"""

from __future__ import annotations

import pytest

from auxspec.models import sequential as model
from auxspec.models.sequential import Err, Invalid, Kind, Ok, State, UndefinedInput, check, violations

PROFILES = ("strict", "upstream")


def mk(
    profile: str = "strict",
    capacity: int = 4,
    keys: str = "",
    refs: dict[str, int] | None = None,
    payloads: dict[str, bytes] | None = None,
) -> State:
    """A state of one-byte objects; ``keys`` are stored in that recency order."""
    payloads = payloads or {}
    return State(
        profile=profile,
        capacity=capacity,
        object_nbytes=1,
        entries=tuple((k, payloads.get(k, k.encode())) for k in keys),
        refs=tuple(sorted((refs or {}).items())),
    )


def order(state: State) -> str:
    return "".join(model.stored_keys(state))


def items(spec: str) -> tuple[model.Item, ...]:
    """``"ab"`` -> objects a and b with their own letter as payload; an
    uppercase letter is the lowercase key with the uppercase payload."""
    return tuple((c.lower(), c.encode()) for c in spec)


def put(state: State, objects: str = "", retain: str = "", release: str = "") -> tuple[State, model.Outcome]:
    new_state, outcome = model.put(state, items(objects), tuple(retain), tuple(release))
    assert check(new_state), violations(new_state)
    return new_state, outcome


# ------------------------------------------------------------------- new


@pytest.mark.parametrize("profile", PROFILES)
def test_new_capacity_is_floor_of_bytes_over_object_size(profile: str) -> None:
    created = model.new(11, 5, profile)
    assert created == State(profile=profile, capacity=2, object_nbytes=5)
    assert model.new(5, 5, profile) == State(profile=profile, capacity=1, object_nbytes=5)


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize(("max_bytes", "object_nbytes"), [(8, 0), (8, -1), (4, 5), (-1, 1), (0, 0)])
def test_new_rejects_sizes_out_of_range(profile: str, max_bytes: int, object_nbytes: int) -> None:
    assert model.new(max_bytes, object_nbytes, profile) == Err(Kind.CONFIG)


def test_new_rejects_non_int_sizes() -> None:
    # (An unknown profile is new()'s precondition; ReferenceStore rejects it.)
    assert model.new(Invalid(), 1, "strict") == Err(Kind.TYPE)
    assert model.new(8, Invalid(), "strict") == Err(Kind.TYPE)
    with pytest.raises(UndefinedInput):
        model.new(Invalid(), 1, "upstream")


# ---------------------------------------------------- rule 1: pins first


@pytest.mark.parametrize("profile", PROFILES)
def test_retains_count_up_and_a_key_may_be_referenced_before_it_is_stored(profile: str) -> None:
    state, outcome = put(mk(profile, keys="a"), retain="aaz")
    assert outcome == Ok()
    assert state.refs == (("a", 2), ("z", 1))
    assert order(state) == "a"  # pins alone store nothing and move nothing


@pytest.mark.parametrize("profile", PROFILES)
def test_releases_count_down_and_zero_drops_the_count(profile: str) -> None:
    state, _ = put(mk(profile, keys="ab", refs={"a": 2, "b": 1}), release="ab")
    assert state.refs == (("a", 1),)


@pytest.mark.parametrize("profile", PROFILES)
def test_retains_apply_before_releases_so_zero_one_zero_works_in_one_call(profile: str) -> None:
    # "a" has no reference; the retain comes first, so the release is valid
    # and "a" ends with no count again (terminal).
    state, outcome = put(mk(profile, keys="ab"), retain="a", release="a")
    assert outcome == Ok()
    assert state.refs == ()
    assert order(state) == "ba"  # terminal move of "a"


def test_apply_pins_reports_terminal_order() -> None:
    counts, terminal, over = model.apply_pins({"a": 1, "b": 2, "c": 1}, ["d"], ["c", "b", "a", "b", "d"])
    assert (counts, terminal, over) == ({}, ["c", "a", "b", "d"], False)


def test_apply_pins_stops_at_the_first_over_release() -> None:
    counts, terminal, over = model.apply_pins({"a": 1}, ["b"], ["a", "b", "a", "b"])
    # "a" and "b" reached zero; the second "a" found nothing and stopped there.
    assert (counts, terminal, over) == ({}, ["a", "b"], True)


# ------------------------------------------------ rule 2: the batch


@pytest.mark.parametrize("profile", PROFILES)
def test_batch_keys_move_to_the_most_recent_end_in_batch_order(profile: str) -> None:
    state, _ = put(mk(profile, keys="abc"), objects="ca")
    assert order(state) == "bca"


@pytest.mark.parametrize("profile", PROFILES)
def test_new_keys_are_inserted_at_the_most_recent_end(profile: str) -> None:
    state, _ = put(mk(profile, keys="ab"), objects="da")
    assert state.entries == (("b", b"b"), ("d", b"d"), ("a", b"a"))


@pytest.mark.parametrize("profile", PROFILES)
def test_duplicates_in_a_batch_keep_first_position_and_last_payload(profile: str) -> None:
    state, _ = put(mk(profile), objects="aBbA")  # a, b, then b and a again with new payloads
    assert state.entries == (("a", b"A"), ("b", b"b"))


@pytest.mark.parametrize("profile", PROFILES)
def test_a_stored_key_keeps_its_payload_first_write_wins(profile: str) -> None:
    state, _ = put(mk(profile, keys="ab"), objects="A")
    assert state.entries == (("b", b"b"), ("a", b"a"))


# ------------------------------------------ rule 3: terminal moves


@pytest.mark.parametrize("profile", PROFILES)
def test_stored_terminal_keys_move_after_the_batch_in_terminal_order(profile: str) -> None:
    state, _ = put(mk(profile, keys="abcd", refs={"a": 1, "b": 1}), objects="c", release="ba")
    assert order(state) == "dcba"


@pytest.mark.parametrize("profile", PROFILES)
def test_a_terminal_key_that_is_not_stored_is_not_created(profile: str) -> None:
    state, _ = put(mk(profile, keys="ab", refs={"z": 1}), release="z")
    assert order(state) == "ab" and state.refs == ()


@pytest.mark.parametrize("profile", PROFILES)
def test_a_key_still_referenced_after_a_release_does_not_move(profile: str) -> None:
    state, _ = put(mk(profile, keys="ab", refs={"a": 2}), release="a")
    assert order(state) == "ab" and state.refs == (("a", 1),)


# ------------------------------------------------ rule 4: eviction


@pytest.mark.parametrize("profile", PROFILES)
def test_eviction_takes_the_least_recent_unreferenced_keys(profile: str) -> None:
    state, outcome = put(mk(profile, capacity=3, keys="abc", refs={"a": 1}), objects="de")
    assert outcome == Ok()
    assert order(state) == "ade"  # b and c evicted; a is pinned


@pytest.mark.parametrize("profile", PROFILES)
def test_batch_keys_are_protected_from_eviction(profile: str) -> None:
    # "a" is least recent but re-put in the batch, so "b" goes instead.
    state, _ = put(mk(profile, capacity=2, keys="ab"), objects="ac")
    assert order(state) == "ac"


@pytest.mark.parametrize("profile", PROFILES)
def test_a_batch_key_that_became_terminal_is_not_protected(profile: str) -> None:
    pinned = mk(profile, capacity=2, keys="ab", refs={"a": 1, "b": 1})
    # Protected, "c" cannot be put: nothing else is evictable.
    assert put(pinned, objects="c")[1] == Err(Kind.CAPACITY)
    # Pinned and unpinned in the same call, the new "c" is evictable, and as
    # the only such key it is evicted at once: the put succeeds.
    state, outcome = put(pinned, objects="c", retain="c", release="c")
    assert outcome == Ok()
    assert order(state) == "ab" and state.refs == (("a", 1), ("b", 1))


@pytest.mark.parametrize("profile", PROFILES)
def test_a_released_key_becomes_evictable_in_the_same_call(profile: str) -> None:
    state, outcome = put(mk(profile, capacity=2, keys="ab", refs={"a": 1, "b": 1}), objects="c", release="a")
    assert outcome == Ok()
    # The terminal move makes "a" most recent, but it is the only evictable key.
    assert order(state) == "bc" and state.refs == (("b", 1),)


def test_choose_victims() -> None:
    order_ = {"a": b"a", "b": b"b", "c": b"c", "d": b"d"}
    assert model.choose_victims(order_, 4, {}, set()) == []
    assert model.choose_victims(order_, 2, {"a": 1}, {"c"}) == ["b", "d"]
    assert model.choose_victims(order_, 2, {"a": 1, "b": 1}, {"c"}) is None


# ---------------------------------------- capacity failure, per profile


def _overflowing(profile: str) -> tuple[State, tuple[State, model.Outcome]]:
    """A put that fails for capacity after touching everything it can.

    Stored a b c t (a, b, t pinned; capacity 4). The put retains x and c,
    releases t (terminal: moves to the end), re-puts a (moves) and adds d, e.
    Then only t is evictable (a, d, e are protected; b, c pinned), but two of
    the six keys must go.
    """
    before = mk(profile, capacity=4, keys="abct", refs={"a": 1, "b": 1, "t": 1})
    return before, put(before, objects="ade", retain="xc", release="t")


def test_capacity_failure_strict_changes_nothing() -> None:
    before, (after, outcome) = _overflowing("strict")
    assert outcome == Err(Kind.CAPACITY)
    assert after == before


def test_capacity_failure_upstream_keeps_counts_and_moves_and_removes_new_keys() -> None:
    before, (after, outcome) = _overflowing("upstream")
    assert outcome == Err(Kind.CAPACITY)
    # Counts stay applied: x and c retained, t released to zero.
    assert after.refs == (("a", 1), ("b", 1), ("c", 1), ("x", 1))
    # Moves stay applied: a (re-put) then t (terminal); only new d, e are removed.
    assert order(before) == "abct"
    assert order(after) == "bcat"
    assert dict(after.entries) == dict(before.entries)


def test_capacity_failure_upstream_removes_a_new_key_even_when_it_was_terminal() -> None:
    # "n" is new and released to zero in the call (so evictable), "p" is new
    # and protected; a, b pinned leave room for nothing: n is not enough.
    before = mk("upstream", capacity=2, keys="ab", refs={"a": 1, "b": 1})
    after, outcome = put(before, objects="np", retain="n", release="n")
    assert outcome == Err(Kind.CAPACITY)
    assert order(after) == "ab" and after.refs == before.refs
    # A stored terminal key is not new: it stays, moved and unpinned.
    after, outcome = put(before, objects="pq", release="a")
    assert outcome == Err(Kind.CAPACITY)  # p, q protected, b pinned: only a can go, two must
    assert order(after) == "ba" and after.refs == (("b", 1),)


@pytest.mark.parametrize("profile", PROFILES)
def test_capacity_failure_when_everything_is_pinned(profile: str) -> None:
    before = mk(profile, capacity=1, keys="a", refs={"a": 1})
    after, outcome = put(before, objects="b")
    assert outcome == Err(Kind.CAPACITY)
    assert after == before  # nothing but the new key was touched, and it is gone


# ------------------------------------------------ over-release, per profile


def test_over_release_strict_changes_nothing() -> None:
    before = mk("strict", keys="ab", refs={"a": 1})
    # a and b reach zero (terminal), then the second "a" has nothing left.
    after, outcome = put(before, objects="c", retain="b", release="aba")
    assert outcome == Err(Kind.UNREFERENCED)
    assert after == before


def test_over_release_upstream_keeps_the_earlier_retains_and_releases() -> None:
    before = mk("upstream", keys="ab", refs={"a": 1, "z": 2})
    after, outcome = put(before, objects="c", retain="bq", release="azaq")
    assert outcome == Err(Kind.UNREFERENCED)
    # Applied: retain b, q; release a (to zero), z (2 -> 1); the second "a" fails.
    # Not applied: the last release of q, the batch, the terminal move of a.
    assert after.refs == (("b", 1), ("q", 1), ("z", 1))
    assert after.entries == before.entries


@pytest.mark.parametrize("profile", PROFILES)
def test_over_release_of_a_never_referenced_key(profile: str) -> None:
    before = mk(profile, keys="a")
    after, outcome = put(before, release="a")
    assert outcome == Err(Kind.UNREFERENCED)
    assert after == before


# ---------------------------------------------------- invalid put inputs


@pytest.mark.parametrize(
    ("objects", "retain", "release", "kind"),
    [
        ((("a", b"aa"),), (), (), Kind.PAYLOAD),
        ((("a", b""),), (), (), Kind.PAYLOAD),
        ((("a", Invalid()),), (), (), Kind.TYPE),
        (((Invalid(), b"a"),), (), (), Kind.TYPE),
        ((("a", b"a"),), (Invalid(),), (), Kind.TYPE),
        ((("a", b"a"),), (), (Invalid(),), Kind.TYPE),
        # the first invalid value in reading order decides the kind
        ((("a", b"aa"), (Invalid(), b"a")), (), (), Kind.PAYLOAD),
        (((Invalid(), b"a"), ("a", b"aa")), (), (), Kind.TYPE),
    ],
)
def test_invalid_put_strict_fails_before_any_change(
    objects: tuple[model.Item, ...], retain: tuple[model.KeyArg, ...], release: tuple[model.KeyArg, ...], kind: Kind
) -> None:
    before = mk("strict", keys="ab", refs={"a": 1})
    assert model.put(before, objects, retain, release) == (before, Err(kind))
    with pytest.raises(UndefinedInput):
        model.put(mk("upstream", keys="ab", refs={"a": 1}), objects, retain, release)


def test_invalid_put_beats_over_release_in_strict() -> None:
    # Validation comes first: a wrong payload is reported even with a bad release.
    before = mk("strict", keys="a")
    assert model.put(before, (("b", b"bb"),), (), ("z",)) == (before, Err(Kind.PAYLOAD))


# ------------------------------------------------------------------ reads


@pytest.mark.parametrize("profile", PROFILES)
def test_get_joins_in_order_then_moves_each_key(profile: str) -> None:
    state, outcome = model.get_concatenated(mk(profile, keys="abcd"), ("c", "a", "c"))
    assert outcome == Ok(b"cac")
    # a, then c again: c was read last, so it ends most recent.
    assert order(state) == "bdac"


@pytest.mark.parametrize("profile", PROFILES)
def test_get_of_nothing_is_empty_and_changes_nothing(profile: str) -> None:
    before = mk(profile, keys="ab")
    assert model.get_concatenated(before, ()) == (before, Ok(b""))


@pytest.mark.parametrize("profile", PROFILES)
def test_get_of_a_missing_key_changes_nothing(profile: str) -> None:
    before = mk(profile, keys="ab", refs={"z": 1})  # referenced but not stored
    assert model.get_concatenated(before, ("a", "z")) == (before, Err(Kind.MISSING))


@pytest.mark.parametrize("profile", PROFILES)
def test_reads_do_not_touch_counts(profile: str) -> None:
    state, _ = model.get_concatenated(mk(profile, keys="ab", refs={"a": 3}), ("a",))
    assert state.refs == (("a", 3),)


def test_invalid_read_keys() -> None:
    before = mk("strict", keys="a")
    assert model.get_concatenated(before, ("a", Invalid())) == (before, Err(Kind.TYPE))
    assert model.read_into(before, ("a",), Invalid()) == (before, Err(Kind.TYPE))
    with pytest.raises(UndefinedInput):
        model.get_concatenated(mk("upstream", keys="a"), (Invalid(),))


@pytest.mark.parametrize("profile", PROFILES)
def test_read_into_has_the_same_effect_as_get(profile: str) -> None:
    before = mk(profile, keys="abc")
    assert model.read_into(before, ("a", "b"), 2) == model.get_concatenated(before, ("a", "b"))
    assert model.read_into(before, ("a", "b"), 100) == model.get_concatenated(before, ("a", "b"))


@pytest.mark.parametrize("profile", PROFILES)
def test_read_into_a_short_buffer_changes_nothing(profile: str) -> None:
    before = mk(profile, keys="abc")
    assert model.read_into(before, ("a", "b"), 1) == (before, Err(Kind.BUFFER))
    # A missing key is reported before the buffer's size.
    assert model.read_into(before, ("a", "z"), 0) == (before, Err(Kind.MISSING))


# ------------------------------------------------------------------ close


@pytest.mark.parametrize("profile", PROFILES)
def test_close_drops_everything_and_is_idempotent(profile: str) -> None:
    state, outcome = model.close(mk(profile, keys="ab", refs={"a": 1, "z": 1}))
    assert outcome == Ok()
    assert state == State(profile=profile, capacity=4, object_nbytes=1, closed=True)
    assert model.close(state) == (state, Ok())


@pytest.mark.parametrize("profile", PROFILES)
def test_every_other_call_after_close_is_a_closed_error(profile: str) -> None:
    closed, _ = model.close(mk(profile, keys="ab"))
    assert model.put(closed, items("c")) == (closed, Err(Kind.CLOSED))
    assert model.put(closed, ()) == (closed, Err(Kind.CLOSED))
    assert model.get_concatenated(closed, ()) == (closed, Err(Kind.CLOSED))
    assert model.read_into(closed, ("a",), 8) == (closed, Err(Kind.CLOSED))
    # Closed wins over invalid input, even where upstream leaves it undefined.
    assert model.put(closed, (("c", Invalid()),)) == (closed, Err(Kind.CLOSED))
    assert model.get_concatenated(closed, (Invalid(),)) == (closed, Err(Kind.CLOSED))


# ------------------------------------------------------- successful puts


@pytest.mark.parametrize("profile", PROFILES)
def test_profiles_agree_on_every_successful_step(profile: str) -> None:
    # A small scripted session; both profiles must end in the same place.
    state = mk(profile, capacity=3)
    script = [
        ("ab", "a", "", "ab"),  # a pinned
        ("cd", "", "", "acd"),  # b evicted, not the pinned a
        ("", "c", "a", "cda"),  # a terminal: moves to the end
        ("e", "", "c", "aec"),  # c terminal moves after e; d evicted
    ]
    for objects, retain, release, expected in script:
        state, outcome = put(state, objects, retain, release)
        assert outcome == Ok()
        assert order(state) == expected
    assert state.refs == ()


# ------------------------------------------------------ check / violations


@pytest.mark.parametrize(
    ("broken", "words"),
    [
        (State("lenient", 4, 1), "unknown profile"),
        (State("strict", 0, 1), "capacity 0 < 1"),
        (State("strict", 4, 0), "object_nbytes 0 < 1"),
        (mk(capacity=1, keys="ab"), "2 stored > capacity 1"),
        (State("strict", 4, 1, entries=(("a", b"a"), ("a", b"b"))), "stored twice"),
        (State("strict", 4, 1, entries=(("a", b"aa"),)), "payload of 'a'"),
        (State("strict", 4, 1, entries=(("a", bytearray(b"a")),)), "payload of 'a'"),  # type: ignore[arg-type]
        (State("strict", 4, 1, refs=(("b", 1), ("a", 1))), "not unique and sorted"),
        (State("strict", 4, 1, refs=(("a", 1), ("a", 2))), "not unique and sorted"),
        (State("strict", 4, 1, refs=(("a", 0),)), "below 1"),
        (State("strict", 4, 1, refs=(("a", -1),)), "below 1"),
        (State("strict", 4, 1, entries=(("a", b"a"),), closed=True), "closed store still holds data"),
        (State("strict", 4, 1, refs=(("a", 1),), closed=True), "closed store still holds data"),
    ],
)
def test_violations_name_each_broken_invariant(broken: State, words: str) -> None:
    found = violations(broken)
    assert any(words in v for v in found), found
    assert not check(broken)


def test_violations_list_every_problem_at_once() -> None:
    broken = State("x", 0, 0, entries=(("a", b"a"),), refs=(("a", 0),), closed=True)
    # profile, capacity, object_nbytes, overfull, payload length, count, closed
    assert len(violations(broken)) == 7


@pytest.mark.parametrize(
    "good",
    [
        mk(keys="ab", refs={"a": 1, "z": 2}),
        State("upstream", 1, 3),
        State("strict", 2, 2, closed=True),
        mk(capacity=2, keys="ab", refs={"a": 1, "b": 1}),
    ],
)
def test_valid_states_have_no_violations(good: State) -> None:
    assert violations(good) == []
    assert check(good)
