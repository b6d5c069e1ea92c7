"""The executable model of the auxiliary-output store.

Every operation is a pure step: ``step(state, inputs) -> (state, outcome)``.
Expected failures are outcomes (``Err(kind)``), never exceptions, so a failing
call can be compared across implementations and languages. The only exception
the model raises is ``UndefinedInput``: an input the ``upstream`` profile does
not define (vLLM corrupts itself on it), which no generator produces.

Contracts are PEP 316 docstrings (``pre:`` / ``post:``) so CrossHair can check
them; ``check(state)`` is the same state invariant, callable at run time.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

# A str, not a Literal: CrossHair cannot build Literal-typed fields; check()
# rejects any other value.
Profile = str
PROFILES: tuple[Profile, ...] = ("strict", "upstream")


class Kind(enum.StrEnum):
    """What went wrong, independent of any language's exception classes."""

    CLOSED = "closed"  # any call after close()
    CAPACITY = "capacity"  # too few evictable keys for the batch
    MISSING = "missing"  # a read named a key that is not stored
    UNREFERENCED = "unreferenced"  # a release named a key with no reference
    PAYLOAD = "payload"  # a payload of the wrong length
    TYPE = "type"  # a key, payload or buffer of the wrong type
    BUFFER = "buffer"  # read_into's buffer is too small
    CONFIG = "config"  # constructor arguments out of range


@dataclass(frozen=True)
class Stats:
    """What ``stats()`` reports: the field names of ``auxstore.StoreStats``.

    ``pinned`` counts stored keys with a reference; ``hits`` counts the keys
    of successful reads (a repeated key each time); ``misses`` the reads that
    failed on a key that is not stored; ``evictions`` the keys evicted;
    ``capacity_failures`` the puts that failed for lack of room.
    """

    stored: int
    capacity: int
    pinned: int
    hits: int
    misses: int
    evictions: int
    capacity_failures: int


# What a successful call returns: the bytes read, len()'s int, in's bool,
# stats()'s Stats, or None.
Value = bytes | int | Stats | None


@dataclass(frozen=True)
class Ok:
    """A successful call and what it returned."""

    value: Value = None


@dataclass(frozen=True)
class Err:
    """A failed call."""

    kind: Kind


Outcome = Ok | Err


@dataclass(frozen=True)
class Invalid:
    """An input value that is not of the type the operation takes.

    Bindings map such values (a non-``str`` key, a non-bytes payload, a
    read-only buffer) to this marker, so the model decides what happens.
    """

    what: str = "invalid"


Key = str
KeyArg = str | Invalid
PayloadArg = bytes | Invalid
Item = tuple[KeyArg, PayloadArg]


class UndefinedInput(ValueError):
    """An input that the ``upstream`` profile leaves undefined (docs/deviations.md)."""


@dataclass(frozen=True)
class Counters:
    """The running counts behind ``stats()`` (see ``Stats``)."""

    hits: int = 0
    misses: int = 0
    evictions: int = 0
    capacity_failures: int = 0


@dataclass(frozen=True)
class State:
    """What a store holds.

    ``entries`` are the stored keys with their payloads, least recent first.
    ``refs`` are the reference counts, sorted by key so equal states compare
    equal; a key may be referenced before (or without) being stored.
    ``counters`` count what happened; they are not what the store holds, so
    they take no part in comparing states (a strict error "changes nothing"
    and still counts a miss or a capacity failure).
    """

    profile: Profile
    capacity: int
    object_nbytes: int
    entries: tuple[tuple[str, bytes], ...] = ()
    refs: tuple[tuple[str, int], ...] = ()
    closed: bool = False
    counters: Counters = field(default=Counters(), compare=False)


# --------------------------------------------------------------------- invariant


def violations(state: State) -> list[str]:
    """Every way ``state`` breaks the state invariant (empty when it holds)."""
    found: list[str] = []
    if state.profile not in PROFILES:
        found.append(f"unknown profile {state.profile!r}")
    if state.capacity < 1:
        found.append(f"capacity {state.capacity} < 1")
    if state.object_nbytes < 1:
        found.append(f"object_nbytes {state.object_nbytes} < 1")
    if len(state.entries) > state.capacity:
        found.append(f"{len(state.entries)} stored > capacity {state.capacity}")
    keys = [key for key, _ in state.entries]
    if len(set(keys)) != len(keys):
        found.append("a key is stored twice")
    for key, payload in state.entries:
        if type(payload) is not bytes or len(payload) != state.object_nbytes:
            found.append(f"payload of {key!r} is not {state.object_nbytes} bytes")
    ref_keys = [key for key, _ in state.refs]
    if ref_keys != sorted(set(ref_keys)):
        found.append("reference keys are not unique and sorted")
    if any(count < 1 for _, count in state.refs):
        found.append("a reference count is below 1")
    if state.closed and (state.entries or state.refs):
        found.append("a closed store still holds data")
    counts = state.counters
    if min(counts.hits, counts.misses, counts.evictions, counts.capacity_failures) < 0:
        found.append("a counter is negative")
    return found


def check(state: State) -> bool:
    """True when ``state`` satisfies the state invariant."""
    return not violations(state)


# ----------------------------------------------------------------- construction


def new(max_bytes: int | Invalid, object_nbytes: int | Invalid, profile: Profile) -> State | Err:
    """The empty store, or why the arguments are rejected.

    pre: profile in PROFILES
    raises: UndefinedInput
    post: isinstance(__return__, Err) or check(__return__)
    """
    if isinstance(max_bytes, Invalid) or isinstance(object_nbytes, Invalid):
        if profile == "upstream":
            raise UndefinedInput("upstream takes int sizes only")
        return Err(Kind.TYPE)
    if object_nbytes <= 0 or max_bytes < object_nbytes:
        return Err(Kind.CONFIG)
    return State(profile=profile, capacity=max_bytes // object_nbytes, object_nbytes=object_nbytes)


# -------------------------------------------------------------------------- put


def put(
    state: State,
    objects: tuple[Item, ...],
    retain: tuple[KeyArg, ...] = (),
    release: tuple[KeyArg, ...] = (),
) -> tuple[State, Outcome]:
    """Pins first, then the batch, then terminal moves, then eviction.

    pre: check(state)
    raises: UndefinedInput
    post: check(__return__[0])
    post: _strict_failure_changes_nothing(state, __return__)
    post: _pinned_keys_survive(state, __return__[0])
    post: _counts_follow_pins(state, retain, release, __return__)
    post: _successful_put_is_exact(state, objects, retain, release, __return__)
    post: _failures_are_justified(state, objects, retain, release, __return__)
    post: _put_is_counted(state, objects, __return__)
    """
    if state.closed:
        return state, Err(Kind.CLOSED)
    valid = validate_put(state.object_nbytes, objects, retain, release)
    if isinstance(valid, Kind):
        if state.profile == "upstream":
            raise UndefinedInput("upstream takes str keys and exact-length bytes only")
        return state, Err(valid)
    items, keys_retained, keys_released = valid

    counts, terminal, overreleased = apply_pins(dict(state.refs), keys_retained, keys_released)
    if overreleased:
        if state.profile == "strict":
            return state, Err(Kind.UNREFERENCED)
        # vLLM raises mid-loop: the retains and releases before it stay applied.
        return replace(state, refs=_frozen_counts(counts)), Err(Kind.UNREFERENCED)

    batch = dict(items)  # as a dict would: first position, last payload
    order = dict(state.entries)  # insertion order is recency order
    inserted = place_batch(order, batch)
    move_terminal(order, terminal)
    protected = set(batch) - set(terminal)
    victims = choose_victims(order, state.capacity, counts, protected)
    if victims is None:
        failed = _counted(state, capacity_failures=1)
        if state.profile == "strict":
            return failed, Err(Kind.CAPACITY)
        # vLLM keeps counts and moves, and only takes back the keys it inserted.
        for key in inserted:
            del order[key]
        return _with(failed, order, counts), Err(Kind.CAPACITY)
    for key in victims:
        del order[key]
    return _with(state, order, counts, evictions=len(victims)), Ok()


def apply_pins(counts: dict[str, int], retain: list[str], release: list[str]) -> tuple[dict[str, int], list[str], bool]:
    """Step 1: retains, then releases, each in order.

    Returns the new counts (``counts`` is updated in place), the keys that
    reached zero in the order they did (terminal keys), and whether a release
    found no reference (the counts then hold what was applied before it).

    pre: all(count >= 1 for count in counts.values())
    post[counts]: __return__[0] is counts and all(count >= 1 for count in counts.values())
    post: __return__[2] == _overreleases(__old__.counts, retain, release)
    post: __return__[2] or __return__[0] == _counts_after(__old__.counts, retain, release)
    post: __return__[2] or __return__[1] == _terminal_after(__old__.counts, retain, release)
    """
    for key in retain:
        counts[key] = counts.get(key, 0) + 1
    terminal: list[str] = []
    for key in release:
        remaining = counts.get(key, 0) - 1
        if remaining < 0:
            return counts, terminal, True
        if remaining:
            counts[key] = remaining
        else:
            del counts[key]
            terminal.append(key)
    return counts, terminal, False


def place_batch(order: dict[str, bytes], batch: dict[str, bytes]) -> list[str]:
    """Step 2b: each batch key moves to the most-recent end; absent keys are
    inserted there. A stored key keeps its payload (first write wins).
    Returns the keys inserted."""
    inserted: list[str] = []
    for key, payload in batch.items():
        if key in order:
            order[key] = order.pop(key)
        else:
            order[key] = payload
            inserted.append(key)
    return inserted


def move_terminal(order: dict[str, bytes], terminal: list[str]) -> None:
    """Step 3: stored terminal keys move to the most-recent end, in terminal order."""
    for key in terminal:
        if key in order:
            order[key] = order.pop(key)


def choose_victims(
    order: dict[str, bytes], capacity: int, counts: dict[str, int], protected: set[str]
) -> list[str] | None:
    """Step 4: the least recent unreferenced, unprotected keys to evict so the
    store fits, or None when there are too few of them.

    pre: capacity >= 1
    post: __return__ is None or _victims_are_least_recent(order, capacity, counts, protected, __return__)
    post: (__return__ is None) == (len([k for k in order if k in counts or k in protected]) > capacity)
    """
    excess = len(order) - capacity
    if excess <= 0:
        return []
    victims: list[str] = []
    for key in order:
        if key not in counts and key not in protected:
            victims.append(key)
            if len(victims) == excess:
                return victims
    return None


def validate_put(
    object_nbytes: int,
    objects: tuple[Item, ...],
    retain: tuple[KeyArg, ...],
    release: tuple[KeyArg, ...],
) -> Kind | tuple[list[tuple[str, bytes]], list[str], list[str]]:
    """Step 0 (strict): the error of the first invalid value in reading order
    (each object's key then payload, then the retain keys, then the release
    keys), or the inputs with their types established."""
    items: list[tuple[str, bytes]] = []
    for key, payload in objects:
        if isinstance(key, Invalid) or isinstance(payload, Invalid):
            return Kind.TYPE
        if len(payload) != object_nbytes:
            return Kind.PAYLOAD
        items.append((key, payload))
    keys: list[str] = []
    for key in retain + release:
        if isinstance(key, Invalid):
            return Kind.TYPE
        keys.append(key)
    return items, keys[: len(retain)], keys[len(retain) :]


def _frozen_counts(counts: dict[str, int]) -> tuple[tuple[str, int], ...]:
    return tuple(sorted(counts.items()))


def _with(state: State, order: dict[str, bytes], counts: dict[str, int], evictions: int = 0) -> State:
    counters = _more(state.counters, evictions=evictions)
    return replace(state, entries=tuple(order.items()), refs=_frozen_counts(counts), counters=counters)


def _counted(state: State, misses: int = 0, capacity_failures: int = 0) -> State:
    """``state`` with its counters advanced by the given amounts."""
    return replace(state, counters=_more(state.counters, misses=misses, capacity_failures=capacity_failures))


def _more(c: Counters, hits: int = 0, misses: int = 0, evictions: int = 0, capacity_failures: int = 0) -> Counters:
    """``c`` advanced by the given amounts (``c`` itself when they are all 0)."""
    if not (hits or misses or evictions or capacity_failures):
        return c
    return Counters(c.hits + hits, c.misses + misses, c.evictions + evictions, c.capacity_failures + capacity_failures)


# ------------------------------------------------------------------------ reads


def get_concatenated(state: State, keys: tuple[KeyArg, ...]) -> tuple[State, Outcome]:
    """The payloads of ``keys`` joined in order; each key then becomes most recent.

    pre: check(state)
    raises: UndefinedInput
    post: check(__return__[0])
    post: _read_is_exact(state, keys, None, __return__)
    """
    return _read(state, keys, None)


def read_into(state: State, keys: tuple[KeyArg, ...], buffer_nbytes: int | Invalid) -> tuple[State, Outcome]:
    """``get_concatenated`` into a caller's buffer of ``buffer_nbytes`` bytes.

    The outcome's value is what is written at the buffer's start; a buffer
    shorter than that is an error that changes nothing.

    pre: check(state)
    pre: isinstance(buffer_nbytes, Invalid) or buffer_nbytes >= 0
    raises: UndefinedInput
    post: check(__return__[0])
    post: _read_is_exact(state, keys, buffer_nbytes, __return__)
    """
    return _read(state, keys, buffer_nbytes)


def _read(state: State, keys: tuple[KeyArg, ...], buffer_nbytes: int | Invalid | None) -> tuple[State, Outcome]:
    if state.closed:
        return state, Err(Kind.CLOSED)
    if any(isinstance(key, Invalid) for key in keys) or isinstance(buffer_nbytes, Invalid):
        if state.profile == "upstream":
            raise UndefinedInput("upstream reads str keys into writable buffers only")
        return state, Err(Kind.TYPE)
    order = dict(state.entries)
    wanted = [key for key in keys if isinstance(key, str)]
    if any(key not in order for key in wanted):
        return _counted(state, misses=1), Err(Kind.MISSING)
    data = b"".join(order[key] for key in wanted)
    if buffer_nbytes is not None and len(data) > buffer_nbytes:
        return state, Err(Kind.BUFFER)
    for key in wanted:
        order[key] = order.pop(key)
    return replace(state, entries=tuple(order.items()), counters=_more(state.counters, hits=len(wanted))), Ok(data)


# ------------------------------------------------------------------------ close


def close(state: State) -> tuple[State, Outcome]:
    """Closing drops everything; closing again is a no-op.

    pre: check(state)
    post: __return__[0].closed and check(__return__[0])
    post: __return__[1] == Ok()
    """
    return replace(state, entries=(), refs=(), closed=True), Ok()


# ------------------------------------------------------------------ observation
# auxstore's additions to vLLM's API. None of them changes the store (nor its
# recency order); each fails on a closed store, like every call but close.


def flush(state: State) -> tuple[State, Outcome]:
    """Wait for pending writes: a synchronous store has none. Entering a
    ``with`` block is the same step.

    pre: check(state)
    post: __return__[0] is state
    post: isinstance(__return__[1], Ok) == (not state.closed)
    """
    if state.closed:
        return state, Err(Kind.CLOSED)
    return state, Ok()


def length(state: State) -> tuple[State, Outcome]:
    """``len(store)``: how many keys are stored.

    pre: check(state)
    post: __return__[0] is state
    post: state.closed or __return__[1] == Ok(len(stored_keys(state)))
    """
    if state.closed:
        return state, Err(Kind.CLOSED)
    return state, Ok(len(state.entries))


def contains(state: State, key: KeyArg) -> tuple[State, Outcome]:
    """``key in store``: whether ``key`` is stored (a non-str key never is).

    pre: check(state)
    post: __return__[0] is state
    post: state.closed or __return__[1] == Ok(any(key == k for k, _ in state.entries))
    """
    if state.closed:
        return state, Err(Kind.CLOSED)
    return state, Ok(isinstance(key, str) and key in dict(state.entries))


def stats(state: State) -> tuple[State, Outcome]:
    """``stats()``: the counters with the store's current size and pins.

    pre: check(state)
    post: __return__[0] is state
    post: state.closed or _stats_are_exact(state, __return__[1])
    """
    if state.closed:
        return state, Err(Kind.CLOSED)
    refs = dict(state.refs)
    c = state.counters
    pinned = sum(1 for key, _ in state.entries if key in refs)
    return state, Ok(
        Stats(len(state.entries), state.capacity, pinned, c.hits, c.misses, c.evictions, c.capacity_failures)
    )


def stored_keys(state: State) -> tuple[str, ...]:
    """The stored keys, least recent first."""
    return tuple(key for key, _ in state.entries)


def references(state: State) -> dict[str, int]:
    """The reference counts (keys with no reference are absent)."""
    return dict(state.refs)


# -------------------------------------------------------------------- contracts
# Each restates one property declaratively, not the way the step computes it,
# so a slip in a step is not mirrored in its contract.


def _strict_failure_changes_nothing(old: State, result: tuple[State, Outcome]) -> bool:
    return old.profile != "strict" or isinstance(result[1], Ok) or result[0] == old


def _pinned_keys_survive(old: State, new: State) -> bool:
    pinned_now = dict(new.refs)
    still = set(stored_keys(new))
    return all(key in still for key in stored_keys(old) if key in pinned_now)


def _expected_counts(old: State, retain: tuple[KeyArg, ...], release: tuple[KeyArg, ...]) -> dict[str, int]:
    return _counts_after(dict(old.refs), retain, release)


def _counts_after(counts: dict[str, int], retain: Sequence[KeyArg], release: Sequence[KeyArg]) -> dict[str, int]:
    """Each key's count plus its retains minus its releases (keys at zero absent)."""
    every = set(counts) | {k for k in [*retain, *release] if isinstance(k, str)}
    totals = {k: counts.get(k, 0) + list(retain).count(k) - list(release).count(k) for k in every}
    return {k: n for k, n in totals.items() if n != 0}


def _overreleases(counts: dict[str, int], retain: Sequence[KeyArg], release: Sequence[KeyArg]) -> bool:
    """Some release finds no reference left, with every retain applied first."""
    return any(
        counts.get(key, 0) + list(retain).count(key) - list(release[: i + 1]).count(key) < 0
        for i, key in enumerate(release)
        if isinstance(key, str)
    )


def _victims_are_least_recent(
    order: dict[str, bytes], capacity: int, counts: dict[str, int], protected: set[str], victims: list[str]
) -> bool:
    """The victims are as many keys as the store is over capacity, none referenced
    or protected, each less recent than every evictable key that stays."""
    position = {key: i for i, key in enumerate(order)}
    stays = [k for k in order if k not in victims and k not in counts and k not in protected]
    return (
        len(set(victims)) == len(victims) == max(0, len(order) - capacity)
        and all(k in order and k not in counts and k not in protected for k in victims)
        and all(position[v] < position[k] for v in victims for k in stays)
        and [k for k in order if k in victims] == victims
    )


def _counts_follow_pins(
    old: State, retain: tuple[KeyArg, ...], release: tuple[KeyArg, ...], result: tuple[State, Outcome]
) -> bool:
    new, outcome = result
    if isinstance(outcome, Err) and outcome.kind != Kind.CAPACITY:
        return True  # strict: unchanged (checked above); upstream: partial
    if isinstance(outcome, Err) and old.profile == "strict":
        return True
    return dict(new.refs) == _expected_counts(old, retain, release)


def _terminal_order(old: State, retain: tuple[KeyArg, ...], release: tuple[KeyArg, ...]) -> list[str]:
    return _terminal_after(dict(old.refs), retain, release)


def _terminal_after(counts: dict[str, int], retain: Sequence[KeyArg], release: Sequence[KeyArg]) -> list[str]:
    # A key is terminal when its running count, after all retains, hits zero
    # at some release; its place in the order is the index of that release.
    # (Only puts whose keys are all str get this far; the filter is for the types.)
    running = dict(counts)
    for key in [k for k in retain if isinstance(k, str)]:
        running[key] = running.get(key, 0) + 1
    hit_zero: list[str] = []
    for key in [k for k in release if isinstance(k, str)]:
        running[key] = running.get(key, 0) - 1
        if running[key] == 0:
            hit_zero.append(key)
    return hit_zero


def _successful_put_is_exact(
    old: State,
    objects: tuple[Item, ...],
    retain: tuple[KeyArg, ...],
    release: tuple[KeyArg, ...],
    result: tuple[State, Outcome],
) -> bool:
    new, outcome = result
    if isinstance(outcome, Err):
        return True
    before = dict(old.entries)
    after = dict(new.entries)
    batch_keys = list(dict.fromkeys(k for k, _ in objects if isinstance(k, str)))
    terminal = _terminal_order(old, retain, release)
    protected = [k for k in batch_keys if k not in terminal]
    touched = set(batch_keys) | set(terminal)
    untouched = [k for k in before if k not in touched]
    # The order before eviction: untouched keys as they were, then the batch,
    # then the stored terminal keys.
    pre_eviction = untouched + protected + [k for k in terminal if k in before or k in batch_keys]
    survivors = [k for k in pre_eviction if k in after]
    evicted = [k for k in pre_eviction if k not in after]
    counts = dict(new.refs)
    eligible = [k for k in pre_eviction if k not in counts and k not in protected]
    last_payload = {k: p for k, p in objects if isinstance(k, str) and isinstance(p, bytes)}
    return (
        list(after) == survivors
        and len(after) == min(old.capacity, len(pre_eviction))
        and evicted == eligible[: len(evicted)]
        and all(after[k] == (before[k] if k in before else last_payload[k]) for k in after)
    )


def _failures_are_justified(
    old: State,
    objects: tuple[Item, ...],
    retain: tuple[KeyArg, ...],
    release: tuple[KeyArg, ...],
    result: tuple[State, Outcome],
) -> bool:
    outcome = result[1]
    if isinstance(outcome, Ok) or outcome.kind in (Kind.CLOSED, Kind.TYPE, Kind.PAYLOAD):
        return True
    expected = _expected_counts(old, retain, release)
    if outcome.kind == Kind.UNREFERENCED:
        # Some release finds no reference left: every retain comes first,
        # then the releases in order.
        return _overreleases(dict(old.refs), retain, release)
    # Capacity: even after evicting every unreferenced, unprotected key the
    # batch and the pinned keys do not fit.
    batch_keys = set(k for k, _ in objects if isinstance(k, str))
    terminal = set(_terminal_order(old, retain, release))
    kept = (batch_keys - terminal) | {k for k in set(dict(old.entries)) | batch_keys if k in expected}
    return outcome.kind == Kind.CAPACITY and len(kept) > old.capacity


def _stats_are_exact(state: State, outcome: Outcome) -> bool:
    c = state.counters
    pinned = set(stored_keys(state)) & set(references(state))
    expected = Stats(
        len(state.entries), state.capacity, len(pinned), c.hits, c.misses, c.evictions, c.capacity_failures
    )
    return outcome == Ok(expected)


def _tally(counters: Counters) -> tuple[int, int, int, int]:
    return counters.hits, counters.misses, counters.evictions, counters.capacity_failures


def _put_is_counted(old: State, objects: tuple[Item, ...], result: tuple[State, Outcome]) -> bool:
    new, outcome = result
    evicted = 0
    if isinstance(outcome, Ok):
        batch = {k for k, _ in objects if isinstance(k, str)}
        evicted = len((set(stored_keys(old)) | batch) - set(stored_keys(new)))
    failed = int(isinstance(outcome, Err) and outcome.kind == Kind.CAPACITY)
    hits, misses, evictions, capacity_failures = _tally(old.counters)
    return _tally(new.counters) == (hits, misses, evictions + evicted, capacity_failures + failed)


def _read_is_exact(
    old: State, keys: tuple[KeyArg, ...], buffer_nbytes: int | Invalid | None, result: tuple[State, Outcome]
) -> bool:
    new, outcome = result
    before = dict(old.entries)
    hits, misses, evictions, capacity_failures = _tally(old.counters)
    if isinstance(outcome, Err):
        missed = int(outcome.kind == Kind.MISSING)
        unchanged = new == old and _tally(new.counters) == (hits, misses + missed, evictions, capacity_failures)
        if outcome.kind == Kind.MISSING:
            justified = any(isinstance(k, str) and k not in before for k in keys)
        elif outcome.kind == Kind.BUFFER:
            justified = isinstance(buffer_nbytes, int) and buffer_nbytes < old.object_nbytes * len(keys)
        else:
            justified = outcome.kind in (Kind.CLOSED, Kind.TYPE)
        return unchanged and justified
    wanted = [k for k in keys if isinstance(k, str)]
    last_read = {k: i for i, k in enumerate(wanted)}
    expected_order = [k for k in before if k not in last_read] + sorted(last_read, key=last_read.__getitem__)
    return (
        outcome.value == b"".join(before[k] for k in wanted)
        and _tally(new.counters) == (hits + len(wanted), misses, evictions, capacity_failures)
        and list(dict(new.entries)) == expected_order
        and dict(new.entries) == before
        and new.refs == old.refs
    )
