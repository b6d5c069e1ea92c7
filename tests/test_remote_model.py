"""The remote profile's model (auxspec.models.remote) against brute force.

The model summarises what the calls so far allow the engine to hold (the
keys that may be stored, and sets of keys one of which is gone). Here the
same calls are followed by brute force: the set of every engine content the
observations allow, closed under eviction between calls (any subset of a
content may remain; nothing comes back). The two must allow the same
outcomes at every step and describe the same contents.
"""

from __future__ import annotations

import json
import subprocess
import sys
from itertools import combinations, product
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from auxspec.checks.crosshair import REMOTE_MODEL_PATH
from auxspec.models import remote
from auxspec.models.sequential import Err, Invalid, Kind, Ok, Outcome

KEYS = ("a", "b", "c", "d")
PAYLOADS = (b"p", b"q")

World = frozenset[str]


def _subsets(keys: World) -> set[World]:
    members = sorted(keys)
    return {frozenset(c) for n in range(len(members) + 1) for c in combinations(members, n)}


class BruteForce:
    """Every engine content the observations allow, and each key's last payload."""

    def __init__(self) -> None:
        self.worlds: set[World] = {frozenset()}
        self.last: dict[str, bytes] = {}

    def evict(self) -> None:
        self.worlds = {sub for world in self.worlds for sub in _subsets(world)}

    def put(self, batch: dict[str, bytes], observed: Outcome) -> None:
        if observed == Ok():
            self.worlds = {world | set(batch) for world in self.worlds}
            self.last.update(batch)

    def read_allows(self, keys: list[str], observed: Outcome) -> set[World]:
        if isinstance(observed, Ok):
            if b"".join(self.last.get(key, b"") for key in keys) != observed.value:
                return set()
            return {world for world in self.worlds if set(keys) <= world}
        return {world for world in self.worlds if not set(keys) <= world}

    def contains_allows(self, key: str, observed: Outcome) -> set[World]:
        return {world for world in self.worlds if (key in world) == (observed == Ok(True))}


def _model_worlds(state: remote.State) -> set[World]:
    keys = frozenset(key for key, _ in state.objects)
    return {world for world in _subsets(keys) if not any(set(members) <= world for members in state.gone)}


call = st.one_of(
    st.tuples(st.just("put"), st.dictionaries(st.sampled_from(KEYS), st.sampled_from(PAYLOADS), max_size=3)),
    st.tuples(st.just("get"), st.lists(st.sampled_from(KEYS), min_size=1, max_size=4)),
    st.tuples(st.just("in"), st.sampled_from(KEYS)),
)


@settings(max_examples=400, deadline=None)
@given(calls=st.lists(st.tuples(call, st.integers(0, 3)), max_size=14))
def test_the_model_allows_exactly_what_brute_force_allows(calls: list[tuple[tuple[str, object], int]]) -> None:
    state = remote.new(16, 1)
    assert isinstance(state, remote.State)
    brute = BruteForce()
    for (name, argument), pick in calls:
        brute.evict()
        assert _model_worlds(state) == brute.worlds
        assert dict(state.objects) == {key: brute.last[key] for world in brute.worlds for key in world}
        if name == "put":
            batch = dict(argument)  # type: ignore[call-overload]
            allowed = remote.put(state, tuple(batch.items()))
            outcomes = allowed.outcomes()
            assert set(outcomes) == ({Ok(), Err(Kind.CAPACITY)} if batch else {Ok()})
            observed = outcomes[pick % len(outcomes)]
            brute.put(batch, observed)
        else:
            if name == "get":
                keys: list[str] = list(argument)  # type: ignore[call-overload]
                allowed = remote.get_concatenated(state, tuple(keys))
                candidates: list[Outcome] = [Ok(b"".join(brute.last.get(k, b"?") for k in keys)), Err(Kind.MISSING)]
                reach = [brute.read_allows(keys, outcome) for outcome in candidates]
            else:
                key = str(argument)
                allowed = remote.contains(state, key)
                candidates = [Ok(True), Ok(False)]
                reach = [brute.contains_allows(key, outcome) for outcome in candidates]
            possible = [outcome for outcome, worlds in zip(candidates, reach, strict=True) if worlds]
            assert sorted(map(repr, allowed.outcomes())) == sorted(map(repr, possible))
            observed = possible[pick % len(possible)]
            brute.worlds = reach[candidates.index(observed)]
        after = allowed.after(observed)
        assert after is not None and remote.check(after), remote.violations(after) if after else observed
        state = after


def test_a_read_of_keys_seen_stored_after_a_failure_pins_the_failure_on_the_rest() -> None:
    state = remote.new(16, 1)
    assert isinstance(state, remote.State)
    state = _only(remote.put(state, (("a", b"p"), ("b", b"q"))), Ok())
    state = _only(remote.get_concatenated(state, ("a", "b")), Err(Kind.MISSING))
    assert state.gone == (("a", "b"),)
    state = _only(remote.get_concatenated(state, ("a",)), Ok(b"p"))
    assert dict(state.objects) == {"a": b"p"}, "b must be the one gone"
    allowed = remote.get_concatenated(state, ("b",))
    assert allowed.outcomes() == (Err(Kind.MISSING),), "an object seen gone never comes back"


def test_a_put_again_lifts_what_a_failure_taught() -> None:
    state = remote.new(16, 1)
    assert isinstance(state, remote.State)
    state = _only(remote.put(state, (("a", b"p"), ("b", b"q"))), Ok())
    state = _only(remote.get_concatenated(state, ("a", "b")), Err(Kind.MISSING))
    state = _only(remote.put(state, (("b", b"p"),)), Ok())
    assert state.gone == ()
    assert Ok(b"pp") in remote.get_concatenated(state, ("a", "b")).outcomes(), "the last put's payload, both stored"


def test_a_failed_put_leaves_the_previous_payload() -> None:
    state = remote.new(16, 1)
    assert isinstance(state, remote.State)
    state = _only(remote.put(state, (("a", b"p"),)), Ok())
    state = _only(remote.put(state, (("a", b"q"), ("b", b"q"))), Err(Kind.CAPACITY))
    assert remote.get_concatenated(state, ("a",)).outcomes() == (Ok(b"p"), Err(Kind.MISSING))
    assert remote.get_concatenated(state, ("b",)).outcomes() == (Err(Kind.MISSING),)


def test_pins_change_nothing_and_a_release_without_a_retain_is_no_error() -> None:
    state = remote.new(16, 1)
    assert isinstance(state, remote.State)
    assert remote.put(state, (), ("a",), ("b", "b")).outcomes() == (Ok(),)
    assert remote.put(state, (), (Invalid(),), ()).outcomes() == (Err(Kind.TYPE),)


@pytest.mark.parametrize(
    ("buffer", "want"),
    [
        (1, (Err(Kind.BUFFER), Err(Kind.MISSING))),
        (2, (Ok(b"pq"), Err(Kind.MISSING))),
        (Invalid(), (Err(Kind.TYPE),)),
    ],
)
def test_read_into_checks_its_buffer(buffer: int | Invalid, want: tuple[Outcome, ...]) -> None:
    state = remote.new(16, 1)
    assert isinstance(state, remote.State)
    state = _only(remote.put(state, (("a", b"p"), ("b", b"q"))), Ok())
    assert remote.read_into(state, ("a", "b"), buffer).outcomes() == want


def test_invalid_input_and_a_closed_store_are_refused_as_strict_refuses_them() -> None:
    assert remote.new(0, 1) == Err(Kind.CONFIG)
    assert remote.new(Invalid(), 1) == Err(Kind.TYPE)
    state = remote.new(16, 2)
    assert isinstance(state, remote.State)
    assert remote.put(state, (("a", b"p"),)).outcomes() == (Err(Kind.PAYLOAD),)
    assert remote.get_concatenated(state, ()).outcomes() == (Ok(b""),)
    closed = _only(remote.close(state), Ok())
    assert _only(remote.close(closed), Ok()) == closed
    for allowed in (remote.put(closed, ()), remote.get_concatenated(closed, ()), remote.contains(closed, "a")):
        assert allowed.outcomes() == (Err(Kind.CLOSED),)


def _only(allowed: remote.Allowed, observed: Outcome) -> remote.State:
    after = allowed.after(observed)
    assert after is not None, f"{observed} is not among {allowed.outcomes()}"
    return after


# ------------------------------------------------------------------ CrossHair


def _crosshair(model: Path, function: str, index: int) -> dict[str, object]:
    pytest.importorskip("crosshair")
    worker = ["--worker", str(model), function, str(index), "20", "--mode", "bounded"]
    done = subprocess.run(
        [sys.executable, "-m", "auxspec.checks.crosshair", *worker],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_crosshair_confirms_a_remote_contract_on_every_state_of_its_bounds() -> None:
    result = _crosshair(REMOTE_MODEL_PATH, "close", 0)
    assert result["status"] == "confirmed", result
    # close takes only a state: one path per state make_remote_state builds.
    assert result["paths"] == result["confirmed_paths"] == 56, result
    assert "(56 states)" in str(result["bounds"]), result


def test_crosshair_refutes_a_remote_read_that_returns_a_stale_payload(tmp_path: Path) -> None:
    source = REMOTE_MODEL_PATH.read_text()
    indent = " " * 16
    right = indent + "branches.append((Ok(b\"\".join(payloads[key] for key in wanted)), _pinned(found, payloads)))\n"
    assert source.count(right) == 1
    # Reads the first key's payload for every key: inside the bounds (two stored keys a and b).
    wrong = right.replace("payloads[key] for", "payloads[wanted[0]] for")
    model = tmp_path / "planted_remote.py"
    model.write_text(source.replace(right, wrong))
    result = _crosshair(model, "get_concatenated", 1)
    assert result["status"] == "refuted", result


def test_the_remote_stores_import_their_engine_client_only_when_built() -> None:
    # The base install has no dependencies: importing auxstore.remote must not need redis.
    code = (
        "import sys, auxstore.remote; assert 'redis' not in sys.modules, sorted(sys.modules); "
        "auxstore.remote.MooncakeBlockObjectStore, auxstore.remote.MooncakeCapacityError; "
        "assert not any(m.startswith('mooncake') for m in sys.modules), sorted(sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]


def test_partial_puts_let_a_refused_batch_be_published_in_part() -> None:
    # Mooncake publishes a batch key by key: a put refused for room may leave its first keys published.
    with remote.partial_puts():
        state = remote.new(16, 1)
    assert isinstance(state, remote.State) and state.partial
    state = _only(remote.put(state, (("a", b"p"),)), Ok())
    allowed = remote.put(state, (("a", b"q"), ("b", b"r")))
    refused = allowed.after(Err(Kind.CAPACITY))
    assert refused is not None and remote.check(refused), refused
    reads = remote.get_concatenated(refused, ("a",)).outcomes()
    assert set(reads) == {Ok(b"p"), Ok(b"q"), Err(Kind.MISSING)}
    assert Ok(b"r") in remote.get_concatenated(refused, ("b",)).outcomes()
    seen = remote.get_concatenated(refused, ("a",)).after(Ok(b"q"))
    assert seen is not None and remote.get_concatenated(seen, ("a",)).outcomes() == (Ok(b"q"), Err(Kind.MISSING))
    # Never a payload no put offered, and a later successful put settles the key.
    assert Ok(b"s") not in reads
    settled = remote.put(refused, (("a", b"s"),)).after(Ok())
    assert settled is not None and remote.get_concatenated(settled, ("a",)).outcomes() == (Ok(b"s"), Err(Kind.MISSING))


def test_without_partial_puts_a_refused_batch_changes_nothing() -> None:
    state = remote.new(16, 1)
    assert isinstance(state, remote.State) and not state.partial
    state = _only(remote.put(state, (("a", b"p"),)), Ok())
    refused = remote.put(state, (("a", b"q"), ("b", b"r"))).after(Err(Kind.CAPACITY))
    assert refused == state
    assert remote.get_concatenated(refused, ("b",)).outcomes() == (Err(Kind.MISSING),)


def test_with_transient_misses_a_failed_read_teaches_nothing() -> None:
    # Mooncake drops a transfer that outlived its read's lease and reports the object missing.
    with remote.transient_misses():
        state = remote.new(16, 1)
    assert isinstance(state, remote.State) and state.transient and not state.partial
    state = _only(remote.put(state, (("a", b"p"),)), Ok())
    missed = remote.get_concatenated(state, ("a",)).after(Err(Kind.MISSING))
    assert missed == state
    assert Ok(b"p") in remote.get_concatenated(missed, ("a",)).outcomes()
    # Without the option the same failure means "gone until put again" (R3).
    plain = _only(remote.put(remote.State(object_nbytes=1), (("a", b"p"),)), Ok())
    gone = remote.get_concatenated(plain, ("a",)).after(Err(Kind.MISSING))
    assert gone is not None and remote.get_concatenated(gone, ("a",)).outcomes() == (Err(Kind.MISSING),)


# With the Mooncake options the model is checked for soundness only: every engine content and
# every outcome an engine could produce, the model allows. It is not exact there (a set of keys
# seen not all stored is forgotten once a refused put names one of them), so it may allow more.

Content = frozenset[tuple[str, bytes]]  # the engine's objects, each with the payload it holds


class MooncakeBruteForce:
    """Every content an engine that publishes refused batches in part, and
    fails reads whose transfers outlive their leases, may hold."""

    def __init__(self) -> None:
        self.contents: set[Content] = {frozenset()}

    def evict(self) -> None:
        self.contents = {frozenset(sub) for held in self.contents for sub in _subsets(held)}  # type: ignore[arg-type]

    def put(self, batch: dict[str, bytes], observed: Outcome) -> None:
        published = [set(part) for n in range(len(batch) + 1) for part in combinations(batch, n)]
        if observed == Ok():
            published = [set(batch)]
        self.contents = {
            frozenset({(k, p) for k, p in held if k not in part} | {(k, batch[k]) for k in part})
            for held in self.contents
            for part in published
        }

    def reads(self, keys: list[str]) -> set[bytes]:
        joined = set()
        for held in self.contents:
            payloads = dict(held)
            if set(keys) <= set(payloads):
                joined.add(b"".join(payloads[key] for key in keys))
        return joined

    def after_read(self, keys: list[str], observed: Outcome) -> None:
        if isinstance(observed, Ok):
            self.contents = {
                held for held in self.contents
                if set(keys) <= set(dict(held)) and b"".join(dict(held)[k] for k in keys) == observed.value
            }
        # A failed read may be an expired lease: it rules nothing out.


def _model_contents(state: remote.State) -> set[Content]:
    keys = [key for key, _ in state.objects]
    found: set[Content] = set()
    for present in _subsets(frozenset(keys)):
        if any(set(members) <= present for members in state.gone):
            continue
        for choice in product(*(remote._candidates(state, key) for key in sorted(present))):
            found.add(frozenset(zip(sorted(present), choice, strict=True)))
    return found


@settings(max_examples=300, deadline=None)
@given(calls=st.lists(st.tuples(call, st.integers(0, 7)), max_size=10))
def test_with_the_mooncake_options_the_model_allows_everything_the_engine_may_do(
    calls: list[tuple[tuple[str, object], int]],
) -> None:
    with remote.partial_puts(), remote.transient_misses():
        state = remote.new(16, 1)
    assert isinstance(state, remote.State)
    brute = MooncakeBruteForce()
    for (name, argument), pick in calls:
        brute.evict()
        assert brute.contents <= _model_contents(state)
        if name == "put":
            batch = dict(argument)  # type: ignore[call-overload]
            allowed = remote.put(state, tuple(batch.items()))
            observed = allowed.outcomes()[pick % len(allowed.outcomes())]
            brute.put(batch, observed)
        elif name == "get":
            keys: list[str] = list(argument)  # type: ignore[call-overload]
            allowed = remote.get_concatenated(state, tuple(keys))
            engine = [Ok(value) for value in sorted(brute.reads(keys))] + [Err(Kind.MISSING)]
            assert set(engine) <= set(allowed.outcomes()), (engine, allowed.outcomes())
            observed = engine[pick % len(engine)]
            brute.after_read(keys, observed)
        else:
            continue  # `in` is outside the judge's alphabet, and its answer here is no lease question
        after = allowed.after(observed)
        assert after is not None and remote.check(after), remote.violations(after) if after else observed
        state = after
