"""``BlockObjectStore.check_invariants`` pinned down: each corruption of the
store's private bookkeeping raises ``InvariantError`` with the one message
that names it, and every intact store passes (docs/mutation.md).

The differential harnesses call the check after every operation, so a
weakened condition lets a corrupted store through unnoticed, and a stricter
one fails correct stores. Each corruption below breaks one rule and leaves
the others intact, so the check must reach the right line: a mutant that
drops a condition lets the state through or fails later with another
message, and one that changes a message or the values in it fails the
exact comparison. Intact stores are taken in the states whose edges the
conditions test: full (every slot made and mapped), with room, several
chunks, a ``max_bytes`` that is no multiple of the object size, closed.
"""

from __future__ import annotations

import mmap
from collections.abc import Callable

import pytest

import auxstore._store as store_module
from auxstore import BlockObject, BlockObjectStore, InvariantError

N = 2  # bytes per object: more than 1, so "* nbytes" and "/ nbytes" differ


def obj(key: str) -> BlockObject:
    return BlockObject(key, key.encode()[:1] * N)


def _full() -> BlockObjectStore:
    """4 of 4 slots made and mapped: 'a' and 'b' unpinned, 'p' pinned twice, 'q' once."""
    store = BlockObjectStore(max_bytes=4 * N, object_nbytes=N)
    store.put([obj("a"), obj("b"), obj("p"), obj("q")], retain_keys=["p", "p", "q"])
    assert (store._made, store._allocated, store.capacity) == (4, 4, 4)
    assert list(store._lru) == ["a", "b"] and store._refs == {"p": 2, "q": 1}
    return store


def _with_room() -> BlockObjectStore:
    """Capacity 4 (max_bytes 9 is no multiple of 2), one slot made of the 4 mapped."""
    store = BlockObjectStore(max_bytes=4 * N + 1, object_nbytes=N)
    store.put([obj("a")])
    assert (store._made, store._allocated, store.capacity) == (1, 4, 4)
    return store


def _several_chunks(monkeypatch: pytest.MonkeyPatch) -> BlockObjectStore:
    """Three chunks (slots 0-1, 2-3, 4-7), five slots made, 'c' pinned."""
    monkeypatch.setattr(store_module, "_FIRST_CHUNK_BYTES", 2 * N)
    store = BlockObjectStore(max_bytes=16 * N, object_nbytes=N)
    store.put([obj(k) for k in "abcde"], retain_keys=["c"])
    assert store._chunk_starts == [0, 2, 4] and (store._made, store._allocated) == (5, 8)
    return store


def _closed() -> BlockObjectStore:
    store = _full()
    store.close()
    return store


def _raised(store: BlockObjectStore) -> str:
    with pytest.raises(InvariantError) as raised:
        store.check_invariants()
    return str(raised.value)


@pytest.mark.parametrize("make", [_full, _with_room, _closed, lambda: BlockObjectStore(max_bytes=N, object_nbytes=N)])
def test_an_intact_store_passes(make: Callable[[], BlockObjectStore]) -> None:
    make().check_invariants()


def test_an_intact_store_of_several_chunks_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    _several_chunks(monkeypatch).check_invariants()


# ------------------------------------------------------------ a closed store


@pytest.mark.parametrize(
    "corrupt",
    [
        lambda s: s._lru.__setitem__("a", 0),
        lambda s: s._pinned.__setitem__("p", 0),
        lambda s: s._refs.__setitem__("p", 1),
        lambda s: setattr(s, "_made", 1),
    ],
    ids=["an-unpinned-key", "a-pinned-key", "a-reference", "a-slot"],
)
def test_a_closed_store_holding_any_one_thing_is_named(corrupt: Callable[[BlockObjectStore], None]) -> None:
    store = _closed()
    corrupt(store)
    assert _raised(store) == "a closed store still holds keys, references or slots"


# ------------------------------------------------- sizes and the chunk table


def test_a_capacity_that_is_not_the_quotient_is_named() -> None:
    store = _with_room()
    store._capacity = 5
    assert _raised(store) == "capacity 5 is not max_bytes // object_nbytes"


def test_more_slots_made_than_capacity_is_named() -> None:
    store = _full()
    store._made = 5
    assert _raised(store) == "5 slots allocated > capacity 4"


def _another_mapping(store: BlockObjectStore) -> mmap.mmap:
    return mmap.mmap(-1, len(store._chunks[0]))


@pytest.mark.parametrize(
    "corrupt",
    [
        lambda s: s._chunk_starts.__setitem__(0, 1),  # the first chunk does not start at slot 0
        lambda s: setattr(s, "_arena", _another_mapping(s)),  # the arena is not the first chunk
        lambda s: s._chunk_starts.append(s._allocated),  # a start with no chunk
        lambda s: s._bases.append(memoryview(_another_mapping(s))),  # a view with no chunk
    ],
    ids=["first-start", "arena", "starts", "bases"],
)
def test_an_inconsistent_chunk_table_is_named(corrupt: Callable[[BlockObjectStore], None]) -> None:
    store = _with_room()
    corrupt(store)
    assert _raised(store) == "the chunk table is inconsistent"


def test_a_chunk_of_the_wrong_length_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    store = _several_chunks(monkeypatch)
    store._allocated = 9  # the last chunk now claims slots 4..9, but maps 4 slots
    assert _raised(store) == "the chunk of slots 4..9 is 8 bytes"


def test_a_chunk_whose_view_is_of_another_mapping_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    store = _several_chunks(monkeypatch)
    store._bases[1] = memoryview(mmap.mmap(-1, 2 * N))  # the right length, the wrong mapping
    assert _raised(store) == "the chunk of slots 2..4 is 4 bytes"


def test_more_slots_made_than_mapped_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    store = _several_chunks(monkeypatch)
    store._made = 9  # within capacity 16, past the 8 mapped
    assert _raised(store) == "8 slots mapped for 9 made, capacity 16"


def test_more_slots_mapped_than_capacity_is_named() -> None:
    # Map the only chunk again one slot bigger: the table is consistent, but
    # it holds more slots than the store may, while every slot made is mapped.
    store = _full()
    bigger = mmap.mmap(-1, 5 * N)
    store._chunks[0], store._bases[0], store._arena = bigger, memoryview(bigger), bigger
    store._base = store._bases[0]
    store._allocated = 5
    assert _raised(store) == "5 slots mapped for 4 made, capacity 4"


# ------------------------------------------------------------- keys and slots


def test_a_key_in_both_tables_is_named() -> None:
    store = _full()
    store._lru["p"] = store._pinned["p"]
    assert _raised(store) == "keys ['p'] are both pinned and unpinned"


def test_a_stored_key_that_is_not_a_str_is_named() -> None:
    store = _with_room()
    store._lru[7] = store._new_slot()  # type: ignore[index]
    assert _raised(store) == "stored key 7 is not a str"


@pytest.mark.parametrize("slot", [None, True, -1, 1, 2])
def test_a_key_holding_no_slot_made_is_named(slot: object) -> None:
    # 1 slot made of 4 mapped: slot 1 (= made) and 2 are mapped but not made;
    # True equals 1 but is no int slot.
    store = _with_room()
    store._lru["z"] = slot  # type: ignore[assignment]
    assert _raised(store) == f"key 'z' holds {slot!r}, which is not an allocated slot"


def test_two_keys_in_one_slot_are_named() -> None:
    store = _full()
    store._lru["z"] = store._lru["a"]
    assert _raised(store) == f"keys 'a' and 'z' share slot {store._lru['a']}"


def test_slots_made_that_no_key_holds_are_counted() -> None:
    store = _full()
    del store._lru["a"]
    assert _raised(store) == "1 of 4 allocated slots hold no key"


# ------------------------------------------------------------------ references


@pytest.mark.parametrize(
    ("key", "count"),
    [("p", 0), ("p", -1), ("p", True), ("p", 1.0), (7, 1)],
    ids=["zero", "negative", "bool", "float", "key-not-a-str"],
)
def test_a_reference_count_that_is_not_a_positive_int_is_named(key: object, count: object) -> None:
    store = _full()
    store._refs[key] = count  # type: ignore[index, assignment]
    assert _raised(store) == f"reference count {count!r} of {key!r} is not a positive int"


def test_a_referenced_key_listed_as_unpinned_is_named() -> None:
    store = _full()
    store._lru["q"] = store._pinned.pop("q")
    assert _raised(store) == "keys ['q'] hold a reference but are listed as unpinned (evictable)"


def test_a_pinned_key_without_a_reference_is_named() -> None:
    store = _full()
    del store._refs["q"]
    assert _raised(store) == "keys ['q'] are listed as pinned but hold no reference"
