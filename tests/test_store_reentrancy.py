"""A call into a store from inside one of its own calls is refused (ReentrantCallError)
and changes nothing; the running call goes on. The store and ReferenceStore alike."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from auxspec.reference.store import ReferenceStore
from auxstore import BlockObject, BlockObjectStore, ReentrantCallError

Store = BlockObjectStore | ReferenceStore
STORES = [BlockObjectStore, ReferenceStore]
ids = [make.__name__ for make in STORES]


def _new(make: type[Store]) -> Store:
    store = make(max_bytes=16, object_nbytes=4)
    store.put([BlockObject("a", b"aaaa"), BlockObject("b", b"bbbb")], retain_keys=["b"])
    return store


def _nested_calls(store: Store) -> list[Callable[[], object]]:
    return [
        lambda: store.put([BlockObject("x", b"xxxx")]),
        lambda: store.put([], release_keys=["b"]),
        lambda: store.get_concatenated(["a"]),
        lambda: store.read_into(["a"], bytearray(4)),
        store.close,
        store.flush,
        store.stats,
        lambda: len(store),
        lambda: "a" in store,
        lambda: store.__enter__(),
    ]


def _refused(call: Callable[[], object], seen: list[str]) -> None:
    try:
        call()
    except ReentrantCallError as error:
        seen.append(str(error))
    else:
        seen.append("ran")


@pytest.mark.parametrize("make", STORES, ids=ids)
def test_every_call_from_a_retain_generator_is_refused_and_the_put_goes_on(make: type[Store]) -> None:
    store = _new(make)
    seen: list[str] = []

    def retains() -> Iterator[str]:
        for call in _nested_calls(store):
            _refused(call, seen)
        yield "c"

    store.put([BlockObject("c", b"cccc")], retain_keys=retains())
    assert len(seen) == 10 and all("cannot nest" in text for text in seen), seen
    assert all("put()" in text for text in seen)
    expected = _new(make)
    expected.put([BlockObject("c", b"cccc")], retain_keys=["c"])
    assert store.snapshot() == expected.snapshot()
    assert store.stats() == expected.stats()
    if isinstance(store, BlockObjectStore):
        store.check_invariants()


@pytest.mark.parametrize("make", STORES, ids=ids)
def test_a_refusal_that_propagates_fails_the_outer_call_and_changes_nothing(make: type[Store]) -> None:
    store = _new(make)
    before = store.snapshot()

    def keys() -> Iterator[str]:
        store.close()
        yield "a"

    with pytest.raises(ReentrantCallError, match=r"close\(\) was called while get_concatenated\(\)"):
        store.get_concatenated(keys())  # type: ignore[arg-type]
    assert store.snapshot() == before
    assert not store.snapshot().closed  # never closed, and never re-opened
    store.close()
    with pytest.raises(RuntimeError, match="closed"):
        store.get_concatenated(keys())  # type: ignore[arg-type]


@dataclass(frozen=True)
class CallingPayload:
    key: str
    store: Store
    seen: list[str]

    @property
    def payload(self) -> bytes:
        _refused(lambda: self.store.put([BlockObject("y", b"yyyy")]), self.seen)
        return b"pppp"


@pytest.mark.parametrize("make", STORES, ids=ids)
def test_a_payload_property_cannot_call_the_store(make: type[Store]) -> None:
    store = _new(make)
    seen: list[str] = []
    store.put([CallingPayload("p", store, seen)])  # type: ignore[list-item]
    assert seen and all("cannot nest" in text for text in seen)  # (binding reads the property twice)
    assert store.get_concatenated(["p"]) == b"pppp"
    assert "y" not in store


class HashCalls(str):
    """A key whose __hash__ calls back into a store."""

    store: Store | None = None
    seen: list[str] = []  # noqa: RUF012 - set per test

    def __hash__(self) -> int:
        if HashCalls.store is not None:
            _refused(HashCalls.store.close, HashCalls.seen)
        return str.__hash__(self)


@pytest.mark.parametrize("make", STORES, ids=ids)
def test_a_key_hash_that_calls_the_store_is_refused_and_the_key_taken_by_value(make: type[Store]) -> None:
    store = _new(make)
    HashCalls.store, HashCalls.seen = store, []
    try:
        store.put([BlockObject(HashCalls("h"), b"hhhh")])
        store.put([], retain_keys=[HashCalls("h")])
        assert store.get_concatenated([HashCalls("h")]) == b"hhhh"
        assert HashCalls("h") in store
    finally:
        HashCalls.store = None
    assert HashCalls.seen and all("cannot nest" in text for text in HashCalls.seen)
    assert not store.snapshot().closed
    assert all(type(key) is str for key, _ in store.snapshot().entries)
    assert ("h", 1) in store.snapshot().references


class HashRaises(str):
    def __hash__(self) -> int:
        raise ReentrantCallError("as if it had called the store and let the refusal through")


@pytest.mark.parametrize("make", STORES, ids=ids)
def test_a_key_whose_hash_raises_is_a_type_error_that_changes_nothing(make: type[Store]) -> None:
    store = _new(make)
    before = store.snapshot()
    with pytest.raises(TypeError):
        store.put([BlockObject(HashRaises("h"), b"hhhh")])
    with pytest.raises(TypeError):
        store.put([], retain_keys=[HashRaises("a")])
    with pytest.raises(TypeError):
        store.get_concatenated([HashRaises("a")])
    assert HashRaises("a") not in store
    assert store.snapshot() == before
