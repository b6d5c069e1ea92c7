"""Sizes by value, and any max_bytes: the store and the reference agree."""

from __future__ import annotations

import pytest

from auxspec.engine.observable import canonical
from auxspec.reference.store import ReferenceStore
from auxstore import BlockObject, BlockObjectStore

STORES = [BlockObjectStore, ReferenceStore]


class LyingIndex(int):
    def __index__(self) -> int:
        return 1

    def __int__(self) -> int:
        return 2


class LyingArithmetic(int):
    def __floordiv__(self, other: object) -> int:
        return 0

    def __rfloordiv__(self, other: object) -> int:
        return 0

    def __lt__(self, other: object) -> bool:
        return False

    def __le__(self, other: object) -> bool:
        return True


class FakesInt:
    @property  # type: ignore[misc]
    def __class__(self) -> type:
        return int


@pytest.mark.parametrize("make", STORES, ids=lambda make: make.__name__)
@pytest.mark.parametrize("kind", [LyingIndex, LyingArithmetic])
def test_int_subclasses_count_as_their_value(make: type[BlockObjectStore], kind: type[int]) -> None:
    store = make(max_bytes=kind(16), object_nbytes=kind(4))
    assert store.capacity == 4 and type(store.capacity) is int
    assert store.object_nbytes == 4 and type(store.object_nbytes) is int
    store.put([BlockObject(key, key.encode() * 4) for key in "abcd"])
    store.put([BlockObject("e", b"eeee")])
    assert [key for key, _ in store.snapshot().entries] == ["b", "c", "d", "e"]


@pytest.mark.parametrize("make", STORES, ids=lambda make: make.__name__)
def test_a_value_faking_int_is_a_type_error(make: type[BlockObjectStore]) -> None:
    with pytest.raises(TypeError):
        make(max_bytes=FakesInt(), object_nbytes=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        make(max_bytes=True, object_nbytes=1)


@pytest.mark.parametrize("max_bytes", [2**36, 2**48, 2**70])
def test_huge_max_bytes_is_accepted_and_costs_only_what_is_stored(max_bytes: int) -> None:
    store = BlockObjectStore(max_bytes=max_bytes, object_nbytes=8)
    reference = ReferenceStore(max_bytes=max_bytes, object_nbytes=8)
    for target in (store, reference):
        target.put([BlockObject(f"k{i}", bytes([i]) * 8) for i in range(100)], retain_keys=["k1"])
        assert target.get_concatenated(["k1", "k99"]) == b"\x01" * 8 + b"\x63" * 8
    assert store.capacity == reference.capacity == max_bytes // 8
    assert store.snapshot() == canonical(reference.snapshot())
    assert store.stats() == reference.stats()
    store.check_invariants()
    from auxstore import _store

    assert store._allocated * 8 <= _store._FIRST_CHUNK_BYTES < max_bytes  # one first chunk, not max_bytes
    store.close()


def test_the_arena_grows_by_chunks_and_reads_across_them(monkeypatch: pytest.MonkeyPatch) -> None:
    from auxstore import _store

    monkeypatch.setattr(_store, "_FIRST_CHUNK_BYTES", 8)  # two 4-byte objects in the first chunk
    store = BlockObjectStore(max_bytes=4 * 11, object_nbytes=4)
    keys = [f"k{i}" for i in range(11)]
    for key in keys:
        store.put([BlockObject(key, key.encode().ljust(4, b"."))])
        store.check_invariants()
    assert store._chunk_starts == [0, 2, 4, 8]  # each chunk as big as all before it, capped at capacity
    assert store._allocated == 11
    expected = b"".join(key.encode().ljust(4, b".") for key in keys)
    assert store.get_concatenated(keys) == expected
    buffer = bytearray(len(expected))
    assert store.read_into(keys, buffer) == len(expected) and bytes(buffer) == expected
    store.put([BlockObject("new", b"new.")])  # evicts k0, reuses its slot: no new chunk
    assert store._allocated == 11
    store.check_invariants()
    store.close()
    store.check_invariants()


@pytest.mark.parametrize("first_chunk_slots", [64, 4])  # one chunk; chunks of 4, 4, 8, 16, 32 slots
def test_a_large_scattered_read_is_one_gather_in_each_chunk(
    monkeypatch: pytest.MonkeyPatch, first_chunk_slots: int
) -> None:
    # The store's own choice (nothing forced): 40 scattered keys, in no slot order, from every chunk.
    pytest.importorskip("numpy", reason="the one-call gather needs numpy (the fast extra; the dev extra has it)")
    from auxstore import _store as store_module
    from auxstore._gather import numpy_gather

    nbytes = 8
    monkeypatch.setattr(store_module, "_FIRST_CHUNK_BYTES", first_chunk_slots * nbytes)
    store = BlockObjectStore(max_bytes=64 * nbytes, object_nbytes=nbytes)
    store.put([BlockObject(f"k{i}", i.to_bytes(nbytes, "little")) for i in range(64)])
    assert len(store._chunks) == (1 if first_chunk_slots == 64 else 5)
    keys = [f"k{(i * 37) % 64}" for i in range(40)]  # every chunk, in no order
    calls: list[object] = []
    real = numpy_gather()
    assert real is not None

    def spy(*args: object) -> None:
        calls.append(args)
        real(*args)  # type: ignore[arg-type]

    buffer = bytearray(40 * nbytes)
    monkeypatch.setattr(store_module, "numpy_gather", lambda: spy)
    assert store.read_into(keys, buffer) == 40 * nbytes
    assert len(calls) == 1
    assert buffer == b"".join(int(k[1:]).to_bytes(nbytes, "little") for k in keys)
    assert [k for k, _ in store.snapshot().entries[-40:]] == keys  # each read key moved to the most-recent end
    store.close()
