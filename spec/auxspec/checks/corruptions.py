"""Ways to break a store's bookkeeping, each of which its invariant check must
catch: the invariants harness shows that the checks the differential
harnesses lean on after every op can fail.

``STORE`` corrupts an ``auxstore.BlockObjectStore`` from the inside (it knows
the store's private fields, as ``auxspec.engine.target.observe_vllm`` knows
vLLM's); ``MODEL`` corrupts a model ``State``. Each corruption applies to any
state a trace can leave: where the part it breaks is missing, it makes one.
"""

from __future__ import annotations

import mmap
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from auxspec.models.sequential import Counters, State

# ------------------------------------------------------------------ the store


def _a_slot(store: Any) -> int:
    """A slot of the store's arena (its number), made if there is none yet."""
    table = store._lru or store._pinned
    return next(iter(table.values())) if table else store._new_slot()  # type: ignore[no-any-return]


def _closed_holds_data(store: Any) -> None:
    store.close()
    store._refs["k0"] = 1


def _arena_of_another_size(store: Any) -> None:
    store._capacity += 1


def _more_slots_than_capacity(store: Any) -> None:
    store._made = store._capacity + 1


def _slot_outside_the_arena(store: Any) -> None:
    store._lru["zz"] = store._allocated  # one past the mapped slots


def _key_that_is_not_a_str(store: Any) -> None:
    store._lru[1] = _a_slot(store)


def _key_without_a_slot(store: Any) -> None:
    store._lru["zz"] = memoryview(bytearray(store._object_nbytes))


def _two_keys_one_slot(store: Any) -> None:
    slot = _a_slot(store)
    store._lru["zy"] = slot
    store._lru["zz"] = slot


def _slot_no_key_holds(store: Any) -> None:
    if store._made < store._capacity:
        store._new_slot()
    else:  # full: forget a key (pinned or not), and its slot is left over
        table = store._lru or store._pinned
        del table[next(iter(table))]


def _count_below_one(store: Any) -> None:
    store._refs["k0"] = 0


def _pinned_table_wrong(store: Any) -> None:
    """A key in the wrong one of the two tables (the unpinned keys in
    recency order, the pinned ones), or in both."""
    lru, pinned = store._lru, store._pinned
    if lru and pinned:
        key = next(iter(pinned))
        lru[key] = pinned[key]  # listed as pinned and as evictable
    elif lru:
        key = next(iter(lru))
        pinned[key] = lru.pop(key)  # pinned with no reference
    elif pinned:
        key = next(iter(pinned))
        lru[key] = pinned.pop(key)  # evictable while it holds a reference
    else:
        pinned["zz"] = store._new_slot()  # pinned with no reference


STORE: tuple[Callable[[Any], None], ...] = (
    _closed_holds_data,
    _arena_of_another_size,
    _more_slots_than_capacity,
    _slot_outside_the_arena,
    _key_that_is_not_a_str,
    _key_without_a_slot,
    _two_keys_one_slot,
    _slot_no_key_holds,
    _count_below_one,
    _pinned_table_wrong,
)


# The chunk table (each chunk's first slot, its mapping, its view, the slots
# mapped). Kept out of ``STORE`` so the invariants corpus keeps choosing the
# corruptions it chose (``which`` is taken modulo ``len(STORE)``);
# tests/test_store_rare_paths.py applies them to stores with one chunk and
# with several.


def _chunk_table_of_two_lengths(store: Any) -> None:
    store._chunk_starts.append(store._allocated)  # a start with no chunk


def _chunk_of_another_size(store: Any) -> None:
    store._allocated += 1  # the last chunk now claims a slot it does not map


def _more_slots_made_than_mapped(store: Any) -> None:
    if store._allocated < store._capacity:
        store._made = store._allocated + 1
        return
    # Every slot is mapped: map the last chunk again one slot bigger, so the
    # table is consistent but holds more slots than capacity.
    nbytes, last = store._object_nbytes, len(store._chunks) - 1
    bigger = mmap.mmap(-1, len(store._chunks[last]) + nbytes)
    bigger[: len(store._chunks[last])] = store._chunks[last][:]
    store._chunks[last] = bigger
    store._bases[last] = memoryview(bigger)
    if last == 0:
        store._arena, store._base = bigger, store._bases[0]
    store._allocated += 1


CHUNK_TABLE: tuple[Callable[[Any], None], ...] = (
    _chunk_table_of_two_lengths,
    _chunk_of_another_size,
    _more_slots_made_than_mapped,
)


def corrupt_store(store: Any, which: int) -> str:
    """Apply corruption ``which`` (modulo their number) to ``store``; its name.
    A closed store has one thing to break: it must hold nothing."""
    corruption = STORE[which % len(STORE)] if store._arena is not None else _closed_holds_data
    corruption(store)
    return corruption.__name__.strip("_").replace("_", " ")


# ------------------------------------------------------------------ the model


def _payload(state: State) -> bytes:
    return b"\x00" * max(state.object_nbytes, 1)


# name -> (corruption, words one of the violations must contain)
MODEL: tuple[tuple[str, Callable[[State], State], str], ...] = (
    ("unknown profile", lambda s: replace(s, profile="lenient"), "unknown profile"),
    ("capacity below 1", lambda s: replace(s, capacity=0), "capacity 0 < 1"),
    ("object size below 1", lambda s: replace(s, object_nbytes=0), "object_nbytes 0 < 1"),
    (
        "more stored than capacity",
        lambda s: replace(s, entries=tuple((f"x{i}", _payload(s)) for i in range(s.capacity + 1))),
        "stored > capacity",
    ),
    ("a key stored twice", lambda s: replace(s, entries=(("x", _payload(s)), ("x", _payload(s)))), "stored twice"),
    ("a payload of another size", lambda s: replace(s, entries=(("x", _payload(s) + b"!"),)), "is not"),
    ("references unsorted", lambda s: replace(s, refs=(("b", 1), ("a", 1))), "not unique and sorted"),
    ("a count below 1", lambda s: replace(s, refs=(("a", 0),)), "below 1"),
    ("closed with data", lambda s: replace(s, closed=True, refs=(("a", 1),)), "closed store still holds"),
    ("a negative counter", lambda s: replace(s, counters=Counters(misses=-1)), "negative"),
)


__all__ = ["CHUNK_TABLE", "MODEL", "STORE", "corrupt_store"]
