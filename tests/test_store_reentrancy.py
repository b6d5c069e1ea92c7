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


def _calls_made_at_every_internal_return(store: BlockObjectStore, call: Callable[[], object]) -> list[str]:
    """Run ``call`` with a profile hook that, each time a function of the
    store's module returns while ``call`` runs (as a signal handler could run
    between any two of its steps), makes a nested ``stats()``; what each
    nested call did, by the returning function's name."""
    import sys
    from types import FrameType

    import auxstore._store as module

    seen: list[str] = []
    inside = [False]
    # The nested call's own checks, and the public calls' own returns: the
    # call has ended there (its guard is cleared), so a call may run.
    skip = {"_blocked", "_running_call", "put", "get_concatenated", "read_into", "close"}

    def hook(frame: FrameType, event: str, arg: object) -> None:
        code = frame.f_code
        if event != "return" or inside[0] or code.co_filename != module.__file__ or code.co_name in skip:
            return
        inside[0] = True
        try:
            store.stats()
        except ReentrantCallError:
            seen.append(f"{code.co_name}: refused")
        except RuntimeError as error:  # the closed store's error, once close has made its change
            seen.append(f"{code.co_name}: {type(error).__name__}")
        else:
            seen.append(f"{code.co_name}: ran")
        finally:
            inside[0] = False

    previous = sys.getprofile()
    sys.setprofile(hook)
    try:
        call()
    finally:
        sys.setprofile(previous)
    return seen


OUTER_CALLS: list[tuple[str, Callable[[BlockObjectStore], object]]] = [
    ("put of new keys", lambda s: s.put([BlockObject("x", b"xxxx"), BlockObject("y", b"yyyy")])),
    ("put that evicts", lambda s: s.put([BlockObject(k, k.encode() * 4) for k in "xyz"])),
    ("put with pins", lambda s: s.put([BlockObject("x", b"xxxx")], retain_keys=["x"], release_keys=["b"])),
    ("get_concatenated", lambda s: s.get_concatenated(["a", "b"])),
    ("read_into", lambda s: s.read_into(["b", "a"], bytearray(8))),
    ("close", lambda s: s.close()),
]


@pytest.mark.parametrize(("name", "outer"), OUTER_CALLS, ids=[name for name, _ in OUTER_CALLS])
def test_a_call_made_between_any_two_steps_of_a_call_is_refused(
    name: str, outer: Callable[[BlockObjectStore], object]
) -> None:
    """Whenever one of the store's internal steps returns, the call is still
    running (its changes included: the commit's return, the moves' return),
    so a call made then, as from a signal handler, is refused; once close has
    made its change the store says it is closed."""
    store = _new(BlockObjectStore)
    assert isinstance(store, BlockObjectStore)
    seen = _calls_made_at_every_internal_return(store, lambda: outer(store))
    assert seen, "no internal step returned"
    wrong = [entry for entry in seen if entry.endswith(": ran")]
    assert not wrong, wrong
    if name != "close":
        assert all(entry.endswith(": refused") for entry in seen), seen
        store.check_invariants()
