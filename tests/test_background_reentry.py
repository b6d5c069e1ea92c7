"""Re-entrancy (issue 18, point 3, background side): a call into the background
store from inside one of its own owner calls, through a retain iterable, a
payload property, a key's ``__hash__`` or a read's key iterable, raises
``ReentrantCallError`` and changes nothing; the outer call then fails with
it (or, if the callback swallows it, completes as if nothing happened).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from auxstore import BackgroundBlockObjectStore, BlockObject, BlockObjectStore, ReentrantCallError

N = 4


def obj(key: str, fill: int = 1) -> BlockObject:
    return BlockObject(key, bytes([fill]) * N)


class Logged(BlockObjectStore):
    def __init__(self) -> None:
        super().__init__(max_bytes=8 * N, object_nbytes=N)
        self.puts: list[list[str]] = []
        self.closes = 0

    def put(self, objects: Any, **pins: Any) -> None:
        super().put(objects, **pins)
        self.puts.append([o.key for o in objects])

    def close(self) -> None:
        self.closes += 1
        super().close()


INNER_CALLS: dict[str, Callable[[BackgroundBlockObjectStore], object]] = {
    "put": lambda store: store.put([obj("nested", 9)]),
    "close": lambda store: store.close(),
    "flush": lambda store: store.flush(),
    "get_concatenated": lambda store: store.get_concatenated(["a"]),
    "len": len,
}


def _outer_calls(callback: Callable[[], None]) -> dict[str, Callable[[BackgroundBlockObjectStore], object]]:
    """Owner calls that run ``callback`` (caller code) while they run."""

    def retains() -> Iterator[str]:
        callback()
        yield "a"

    class Payload:
        key = "p"

        @property
        def payload(self) -> bytes:
            callback()
            return b"\x05" * N

    class Key(str):
        def __hash__(self) -> int:
            callback()
            return str.__hash__(self)

    def read_keys() -> Iterator[str]:
        yield "a"
        callback()

    return {
        "put via retain iterable": lambda store: store.put([obj("b")], retain_keys=retains()),
        "put via payload property": lambda store: store.put([Payload()]),
        "put via key __hash__": lambda store: store.put([BlockObject(Key("k"), b"\x06" * N)]),
        "get_concatenated via key iterable": lambda store: store.get_concatenated(read_keys()),
    }


OUTER_NAMES = list(_outer_calls(lambda: None))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("inner_call", list(INNER_CALLS))
@pytest.mark.parametrize("outer_call", OUTER_NAMES)
@pytest.mark.parametrize("swallow", [False, True], ids=["propagates", "swallowed"])
def test_a_nested_call_is_refused_and_changes_nothing(outer_call: str, inner_call: str, swallow: bool) -> None:
    inner = Logged()
    store = BackgroundBlockObjectStore(inner, max_pending_batches=2)
    store.put([obj("a")])
    store.flush()
    seen: list[BaseException] = []

    def callback() -> None:
        try:
            INNER_CALLS[inner_call](store)
        except ReentrantCallError as error:
            seen.append(error)
            if not swallow:
                raise
        else:
            seen.append(AssertionError(f"{inner_call} ran inside {outer_call}"))

    call = _outer_calls(callback)[outer_call]
    if swallow:
        call(store)  # completes as if the nested call had not been made
    else:
        with pytest.raises((ReentrantCallError, TypeError)) as raised:
            call(store)
        # The batch validator reports a key whose __hash__ raised as a TypeError, chained to it.
        error = raised.value
        assert isinstance(error, ReentrantCallError) or isinstance(error.__cause__, ReentrantCallError)
    assert len(seen) == 1 and isinstance(seen[0], ReentrantCallError), seen
    # Nothing changed: not closed, the nested put never queued, the store works.
    store.flush()
    assert inner.closes == 0
    expected = [["a"]] + ([[{"put via retain iterable": "b", "put via payload property": "p"}.get(outer_call, "k")]]
                          if swallow and outer_call.startswith("put") else [])
    assert inner.puts == expected
    store.put([obj("z", 3)])
    assert store.get_concatenated(["z"]) == b"\x03" * N
    store.close()
    assert inner.closes == 1


@pytest.mark.timeout(60)
def test_a_key_hash_calling_put_during_a_membership_test_is_refused() -> None:
    store = BackgroundBlockObjectStore(BlockObjectStore(max_bytes=4 * N, object_nbytes=N), max_pending_batches=1)
    store.put([obj("a")])
    nested: list[BaseException] = []

    class Key(str):
        def __hash__(self) -> int:
            try:
                store.put([obj("x")])
            except ReentrantCallError as error:
                nested.append(error)
                raise
            return str.__hash__(self)

    # What `in` answers for a key whose hash raised is the inner store's business.
    with contextlib.suppress(TypeError, ReentrantCallError):
        Key("a") in store  # noqa: B015 - the membership test is the call under test
    assert len(nested) == 1
    assert "x" not in store and "a" in store
    store.close()


@pytest.mark.timeout(60)
def test_a_stale_mark_left_by_an_interrupted_call_does_not_refuse_the_next() -> None:
    store = BackgroundBlockObjectStore(BlockObjectStore(max_bytes=4 * N, object_nbytes=N), max_pending_batches=1)
    store._s.in_call = True  # what an exception between a call's end and its clean-up leaves
    store.put([obj("a")])  # nothing of the store runs on the stack: allowed
    assert store.get_concatenated(["a"]) == b"\x01" * N
    store.close()


@pytest.mark.timeout(60)
@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="signals need the main thread")
def test_a_signal_handler_calling_the_store_during_a_call_is_refused() -> None:
    store = BackgroundBlockObjectStore(BlockObjectStore(max_bytes=4 * N, object_nbytes=N), max_pending_batches=1)
    outcomes: list[str] = []

    def handler(signum: int, frame: Any) -> None:
        try:
            store.put([obj("from-handler")])
        except ReentrantCallError:
            outcomes.append("refused")
        else:
            outcomes.append("ran")

    class Payload:
        key = "p"

        @property
        def payload(self) -> bytes:
            signal.raise_signal(signal.SIGUSR1)  # the handler runs here, inside put
            return b"\x07" * N

    previous = signal.signal(signal.SIGUSR1, handler)
    try:
        store.put([Payload()])
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert outcomes == ["refused"]
    assert store.get_concatenated(["p"]) == b"\x07" * N and "from-handler" not in store
    store.close()
