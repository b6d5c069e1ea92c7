"""The sequential model's semantics, stepped in place: a call costs in
proportion to its own size, not to the store's.

``models.sequential`` copies its whole state on every step, which is what
makes it obviously right and CrossHair-checkable, and what makes a life of
100,000 calls over 70,000 slots cost billions of steps. This module holds
the same state mutably (a recency-ordered dict, the counts, a lazy heap of
eviction candidates by recency stamp) and offers the model's step functions
under the model's names and signatures, so ``engine.table.step`` takes it as
the semantics and the one compare loop runs on it unchanged.

It is not a second semantics: it reuses the model's types and its input
validation, and tests/test_incremental_model.py checks it against the model
(outcome and whole state after every call, both profiles) on many lives.
What it adds is bookkeeping: a put is decided (fits or fails) from counts
before anything changes, so a strict failure needs no rollback; eviction
pops the least recent candidates from a heap, skipping pinned and protected
keys, so pinned keys at the old end cost nothing on later puts.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from collections.abc import Callable

from auxspec.models.sequential import (
    Counters,
    Err,
    Invalid,
    Item,
    KeyArg,
    Kind,
    Ok,
    Outcome,
    Stats,
    UndefinedInput,
    validate_put,
)


class Live:
    """A store's state, changed in place by this module's steps. It reads as
    a ``models.sequential.State`` (``entries``, ``refs``, ``closed``,
    ``counters``; built on demand, O(store)), so ``observe`` and the model's
    ``violations`` take it at checkpoints."""

    def __init__(self, profile: str, capacity: int, object_nbytes: int) -> None:
        self.profile, self.capacity, self.object_nbytes = profile, capacity, object_nbytes
        self.closed = False
        self.order: OrderedDict[str, bytes] = OrderedDict()  # least recent first
        self.counts: dict[str, int] = {}
        self.stamp: dict[str, int] = {}  # stored key -> when it last moved to the most-recent end
        self.clock = 0
        # (stamp, key) of keys that may be evictable; an entry whose stamp is
        # not the key's own, or whose key is gone or pinned, is stale and dropped
        # when popped. A key that becomes evictable again is pushed again.
        self.heap: list[tuple[int, str]] = []
        self.pinned_stored = 0  # stored keys with a reference (stats' pinned)
        self.hits = self.misses = self.evictions = self.capacity_failures = 0
        self.changes = 0  # bumped by every change of order, counts or closed: keys the built views below
        self._views: dict[str, tuple[int, tuple[tuple[str, object], ...]]] = {}

    # ------------------------------------------------ read as a model State

    @property
    def entries(self) -> tuple[tuple[str, bytes], ...]:
        return self._view("entries", lambda: tuple(self.order.items()))  # type: ignore[return-value]

    @property
    def refs(self) -> tuple[tuple[str, int], ...]:
        return self._view("refs", lambda: tuple(sorted(self.counts.items())))  # type: ignore[return-value]

    def _view(self, name: str, build: Callable[[], tuple[tuple[str, object], ...]]) -> tuple[tuple[str, object], ...]:
        """A view built once per state (the invariant check and the snapshot
        of one checkpoint read it several times)."""
        cached = self._views.get(name)
        if cached is None or cached[0] != self.changes:
            cached = self.changes, build()
            self._views[name] = cached
        return cached[1]

    @property
    def counters(self) -> Counters:
        return Counters(self.hits, self.misses, self.evictions, self.capacity_failures)

    # ---------------------------------------------------------- bookkeeping

    def _to_end(self, key: str) -> None:
        """``key`` (stored) moves to the most-recent end."""
        self.order.move_to_end(key)
        self._stamped(key)

    def _stamped(self, key: str) -> None:
        self.changes += 1
        self.clock += 1
        self.stamp[key] = self.clock
        heapq.heappush(self.heap, (self.clock, key))
        if len(self.heap) > 2 * len(self.order) + 64:  # mostly stale: rebuild, amortised over the pushes
            self.heap = [(self.stamp[k], k) for k in self.order if k not in self.counts]
            heapq.heapify(self.heap)

    def _set_count(self, key: str, count: int) -> None:
        """``key``'s count becomes ``count``, keeping ``pinned_stored``."""
        self.changes += 1
        was = key in self.counts
        if count:
            self.counts[key] = count
        else:
            self.counts.pop(key, None)
        if key in self.order and was != bool(count):
            self.pinned_stored += 1 if count else -1


def new(max_bytes: int | Invalid, object_nbytes: int | Invalid, profile: str) -> Live | Err:
    """The empty store, or why the arguments are rejected (as the model's ``new``)."""
    if isinstance(max_bytes, Invalid) or isinstance(object_nbytes, Invalid):
        if profile == "upstream":
            raise UndefinedInput("upstream takes int sizes only")
        return Err(Kind.TYPE)
    if object_nbytes <= 0 or max_bytes < object_nbytes:
        return Err(Kind.CONFIG)
    return Live(profile, max_bytes // object_nbytes, object_nbytes)


def put(
    state: Live, objects: tuple[Item, ...], retain: tuple[KeyArg, ...] = (), release: tuple[KeyArg, ...] = ()
) -> tuple[Live, Outcome]:
    """The model's ``put``, in O(batch + lists + evicted) (amortised)."""
    if state.closed:
        return state, Err(Kind.CLOSED)
    valid = validate_put(state.object_nbytes, objects, retain, release)
    if isinstance(valid, Kind):
        if state.profile == "upstream":
            raise UndefinedInput("upstream takes str keys and exact-length bytes only")
        return state, Err(valid)
    items, retained, released = valid
    counts = state.counts

    # Step 1 as a change to the touched keys' counts, applied only once it stands.
    changed: dict[str, int] = {}
    for key in retained:
        changed[key] = changed.get(key, counts.get(key, 0)) + 1
    terminal: list[str] = []
    for key in released:
        count = changed.get(key, counts.get(key, 0)) - 1
        if count < 0:
            if state.profile == "upstream":  # vLLM raised mid-loop: what came before stays applied
                for done, now in changed.items():
                    state._set_count(done, now)
                    if not now and done in state.order:  # evictable again, in place
                        heapq.heappush(state.heap, (state.stamp[done], done))
            return state, Err(Kind.UNREFERENCED)
        changed[key] = count
        if not count:
            terminal.append(key)

    batch = dict(items)  # as a dict would: first position, last payload
    order = state.order
    fresh = [key for key in batch if key not in order]
    excess = len(order) + len(fresh) - state.capacity
    ending = set(terminal)
    protected = [key for key in batch if key not in ending]
    if excess > 0:
        # Evictable once the counts change: stored or new, no reference, not protected.
        evictable = len(order) - state.pinned_stored
        for key, now in changed.items():
            if key in order:
                evictable += (key in counts) - (now > 0)
        evictable += sum(1 for key in fresh if not changed.get(key, counts.get(key, 0)))
        evictable -= sum(1 for key in protected if not changed.get(key, counts.get(key, 0)))
        if evictable < excess:
            state.capacity_failures += 1
            if state.profile == "strict":
                return state, Err(Kind.CAPACITY)
            # vLLM keeps counts, re-put moves and terminal moves; the new keys never land.
            for key, now in changed.items():
                state._set_count(key, now)
            for key in batch:
                if key in order:
                    state._to_end(key)
            for key in terminal:
                if key in order:
                    state._to_end(key)
            return state, Err(Kind.CAPACITY)

    for key, now in changed.items():
        state._set_count(key, now)
    for key, payload in batch.items():
        if key in order:
            state._to_end(key)
        else:
            order[key] = payload
            state._stamped(key)
            if key in counts:
                state.pinned_stored += 1
    for key in terminal:
        if key in order:
            state._to_end(key)
    if excess > 0:
        state.evictions += _evict(state, excess, set(protected))
    return state, Ok()


def _evict(state: Live, excess: int, protected: set[str]) -> int:
    """Evict the ``excess`` least recent keys that are neither pinned nor
    protected (``put`` made sure there are that many)."""
    heap, order, stamp, counts = state.heap, state.order, state.stamp, state.counts
    kept: list[tuple[int, str]] = []
    evicted = 0
    while evicted < excess:
        entry = heapq.heappop(heap)
        stamped, key = entry
        if key not in order or stamp[key] != stamped or key in counts:
            continue  # stale, or pinned (pushed again when its count returns to zero)
        if key in protected:
            kept.append(entry)
            continue
        del order[key], stamp[key]
        evicted += 1
    state.changes += 1
    for entry in kept:
        heapq.heappush(heap, entry)
    return evicted


def _read(state: Live, keys: tuple[KeyArg, ...], buffer_nbytes: int | Invalid | None) -> tuple[Live, Outcome]:
    if state.closed:
        return state, Err(Kind.CLOSED)
    if any(isinstance(key, Invalid) for key in keys) or isinstance(buffer_nbytes, Invalid):
        if state.profile == "upstream":
            raise UndefinedInput("upstream reads str keys into writable buffers only")
        return state, Err(Kind.TYPE)
    order = state.order
    wanted = [key for key in keys if isinstance(key, str)]
    if any(key not in order for key in wanted):
        state.misses += 1
        return state, Err(Kind.MISSING)
    data = b"".join([order[key] for key in wanted])
    if buffer_nbytes is not None and len(data) > buffer_nbytes:
        return state, Err(Kind.BUFFER)
    for key in wanted:
        state._to_end(key)
    state.hits += len(wanted)
    return state, Ok(data)


def get_concatenated(state: Live, keys: tuple[KeyArg, ...]) -> tuple[Live, Outcome]:
    """The model's ``get_concatenated``, in O(keys)."""
    return _read(state, keys, None)


def read_into(state: Live, keys: tuple[KeyArg, ...], buffer_nbytes: int | Invalid) -> tuple[Live, Outcome]:
    """The model's ``read_into``, in O(keys)."""
    return _read(state, keys, buffer_nbytes)


def close(state: Live) -> tuple[Live, Outcome]:
    state.changes += 1
    state.closed = True
    state.order.clear()
    state.counts.clear()
    state.stamp.clear()
    state.heap.clear()
    state.pinned_stored = 0
    return state, Ok()


def flush(state: Live) -> tuple[Live, Outcome]:
    return state, Err(Kind.CLOSED) if state.closed else Ok()


def length(state: Live) -> tuple[Live, Outcome]:
    return state, Err(Kind.CLOSED) if state.closed else Ok(len(state.order))


def contains(state: Live, key: KeyArg) -> tuple[Live, Outcome]:
    if state.closed:
        return state, Err(Kind.CLOSED)
    return state, Ok(isinstance(key, str) and key in state.order)


def stats(state: Live) -> tuple[Live, Outcome]:
    if state.closed:
        return state, Err(Kind.CLOSED)
    counted = (state.hits, state.misses, state.evictions, state.capacity_failures)
    return state, Ok(Stats(len(state.order), state.capacity, state.pinned_stored, *counted))
