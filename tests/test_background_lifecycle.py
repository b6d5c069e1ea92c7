"""The background store over any inner store, and the life of its writer.

- Duck-typed inner stores (issue 16, point 6): the store takes whatever
  vLLM's takes. The owner checks payload sizes only when the inner store
  states a fixed ``int`` ``object_nbytes``; otherwise a bad payload is the
  inner store's business, and its error is latched as any inner failure.
- A dropped store stops its writer (issue 18, point 7): the writer holds no
  strong reference to the store; a store that becomes garbage without
  ``close`` has its queued batches applied, its inner store closed and its
  writer ended.
- Values, not objects (issue 18, point 4): ``max_pending_batches`` and the
  inner store's ``object_nbytes`` are read by value, whatever an ``int``
  subclass claims; payloads are copied at the call whatever object holds
  them; a key that cannot be hashed fails the call, not the store.
"""

from __future__ import annotations

import gc
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any
from unittest import mock

import pytest

from auxstore import BackgroundBlockObjectStore, BlockObject, BlockObjectStore, BlockObjectStoreError

N = 4
WRITER = "auxstore-background-writer"


def obj(key: str, fill: int = 1, size: int = N) -> BlockObject:
    return BlockObject(key, bytes([fill]) * size)


def _writers() -> int:
    return sum(t.name == WRITER for t in threading.enumerate())


def _wait_until(predicate: Any, timeout: float = 10.0) -> bool:
    end = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > end:
            return False
        time.sleep(0.005)
    return True


# ------------------------------------------------------------ duck typing


@pytest.mark.timeout(30)
def test_a_mock_inner_store_is_published_to_without_blocking_the_caller() -> None:
    inner = mock.Mock()
    inner.get_concatenated.return_value = b"joined"
    entered, release = threading.Event(), threading.Event()

    def slow_put(*args: Any, **kwargs: Any) -> None:
        entered.set()
        assert release.wait(10), "the test never released the writer"

    inner.put.side_effect = slow_put
    store = BackgroundBlockObjectStore(inner, max_pending_batches=2)
    payload = bytearray(b"abc")  # any size: a Mock states no object size
    store.put([BlockObject("a", payload)], retain_keys=["a"])  # type: ignore[arg-type]
    assert entered.wait(10)  # the writer is inside the inner put...
    store.put([obj("b", size=7)], release_keys=("a",))  # ...and the owner still queues without waiting
    payload[:] = b"xyz"  # after the call: must not reach the inner store
    assert inner.put.call_count == 1
    release.set()
    assert store.get_concatenated(["a", "b"]) == b"joined"  # read-your-writes, then the inner store's answer
    assert inner.put.call_count == 2
    (first_objects,), first_kwargs = inner.put.call_args_list[0]
    (second_objects,), second_kwargs = inner.put.call_args_list[1]
    assert [(o.key, bytes(o.payload)) for o in first_objects] == [("a", b"abc")]
    assert first_kwargs == {"retain_keys": ("a",), "release_keys": ()}
    assert [(o.key, o.payload) for o in second_objects] == [("b", b"\x01" * 7)]
    assert second_kwargs == {"retain_keys": (), "release_keys": ("a",)}
    inner.get_concatenated.assert_called_once_with(["a", "b"])
    store.close()
    inner.close.assert_called_once_with()
    assert store.object_nbytes is inner.object_nbytes  # what the inner store says, whatever it is


class _NoSize:
    """An inner store that states no object size and refuses empty payloads itself."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}
        self.closed = False

    def put(self, objects: list[Any], *, retain_keys: Any = (), release_keys: Any = ()) -> None:
        for o in objects:
            if not o.payload:
                raise ValueError(f"empty payload for {o.key!r}")
        self.data.update((o.key, o.payload) for o in objects)

    def get_concatenated(self, keys: list[str]) -> bytes:
        return b"".join(self.data[k] for k in keys)

    def close(self) -> None:
        self.closed = True


class _RaisingSize(_NoSize):
    @property
    def object_nbytes(self) -> int:
        raise RuntimeError("sizes vary")


@pytest.mark.timeout(30)
@pytest.mark.parametrize("kind", [_NoSize, _RaisingSize])
def test_an_inner_store_without_a_fixed_size_checks_payloads_itself(kind: type[_NoSize]) -> None:
    inner = kind()
    store = BackgroundBlockObjectStore(inner, max_pending_batches=1)
    store.put([obj("a", size=1), obj("b", size=100)])  # any sizes: the inner store decides
    assert store.get_concatenated(["b", "a"]) == b"\x01" * 101
    with pytest.raises(TypeError):  # still bytes-like only: the owner copies what it queues
        store.put([BlockObject("c", "text")])  # type: ignore[arg-type]
    store.put([obj("d", size=0)])  # refused by the inner store, on the writer thread: latched
    with pytest.raises(BlockObjectStoreError) as raised:
        store.flush()
    assert isinstance(raised.value.__cause__, ValueError)
    with pytest.raises(BlockObjectStoreError):
        store.close()
    assert inner.closed


class _LyingInt(int):
    """An int whose conversions lie: its value is what int.__int__ sees."""

    def __int__(self) -> int:
        return 0

    def __index__(self) -> int:
        return 0


@pytest.mark.timeout(30)
def test_a_fixed_size_given_as_a_lying_int_subclass_is_read_by_value() -> None:
    class Inner(_NoSize):
        object_nbytes = _LyingInt(N)

    store = BackgroundBlockObjectStore(Inner(), max_pending_batches=1)
    assert store.object_nbytes == N and type(store.object_nbytes) is int
    with pytest.raises(ValueError):
        store.put([obj("a", size=N + 1)])  # checked at the call against the real value
    store.put([obj("a")])
    assert store.get_concatenated(["a"]) == b"\x01" * N
    store.close()


@pytest.mark.parametrize("size", [mock.Mock(), "4", 4.0, True, None])
def test_anything_but_a_real_int_size_states_no_size(size: object) -> None:
    class Inner(_NoSize):
        object_nbytes = size

    store = BackgroundBlockObjectStore(Inner(), max_pending_batches=1)
    store.put([obj("a", size=3)])  # no owner-side length check
    assert store.get_concatenated(["a"]) == b"\x01" * 3
    store.close()


# ---------------------------------------------------------- by value


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("value", "bound"), [(_LyingInt(2), 2), (_LyingInt(1), 1)])
def test_max_pending_batches_is_read_by_value(value: int, bound: int) -> None:
    inner = BlockObjectStore(max_bytes=8 * N, object_nbytes=N)
    store = BackgroundBlockObjectStore(inner, max_pending_batches=value)
    assert store.max_pending_batches == bound and type(store.max_pending_batches) is int
    for i in range(6):  # would block forever on a bound of 0
        store.put([obj(f"k{i}")])
    assert len(store) == 6
    store.close()


@pytest.mark.parametrize("value", [_LyingInt(0), _LyingInt(-3)])
def test_a_lying_int_below_one_is_refused_by_its_value(value: int) -> None:
    threads = threading.active_count()
    with pytest.raises(ValueError):
        BackgroundBlockObjectStore(BlockObjectStore(max_bytes=4 * N, object_nbytes=N), max_pending_batches=value)
    assert threading.active_count() == threads


@dataclass(frozen=True)
class _Window:
    """Frozen, but its payload is a property over a buffer the caller keeps."""

    key: str
    buffer: bytearray

    @property
    def payload(self) -> bytearray:
        return self.buffer


@dataclass(frozen=True)
class _Snapshotted:
    """Frozen, and its payload property returns bytes, made anew from the buffer each time."""

    key: str
    buffer: bytearray

    @property
    def payload(self) -> bytes:
        return bytes(self.buffer)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("kind", [_Window, _Snapshotted])
def test_every_payload_is_copied_at_the_call_whatever_holds_it(kind: Any) -> None:
    gate_open = threading.Event()

    class Held(BlockObjectStore):
        def put(self, *args: Any, **kwargs: Any) -> None:
            assert gate_open.wait(10)
            super().put(*args, **kwargs)

    inner = Held(max_bytes=4 * N, object_nbytes=N)
    store = BackgroundBlockObjectStore(inner, max_pending_batches=2)
    buffer = bytearray(b"good")
    store.put([kind("k", buffer)])
    buffer[:] = b"EVIL"  # before the writer applies it
    gate_open.set()
    assert store.get_concatenated(["k"]) == b"good"
    store.close()


class _Unhashable(str):
    def __hash__(self) -> int:
        raise RuntimeError("no hash for you")


class _Odd(str):
    """Hashable, but its own equality would alias every key: stored by value."""

    def __hash__(self) -> int:
        return 0

    def __eq__(self, other: object) -> bool:
        return True


@pytest.mark.timeout(30)
@pytest.mark.parametrize("where", ["key", "retain", "release"])
def test_a_key_that_cannot_be_hashed_fails_the_call_not_the_store(where: str) -> None:
    inner = BlockObjectStore(max_bytes=4 * N, object_nbytes=N)
    store = BackgroundBlockObjectStore(inner, max_pending_batches=1)
    bad = _Unhashable("k")
    cases: dict[str, dict[str, Any]] = {
        "key": {"objects": [BlockObject(bad, b"\x00" * N)]},
        "retain": {"objects": [obj("a")], "retain_keys": [bad]},
        "release": {"objects": [], "release_keys": [bad]},
    }
    arguments = cases[where]
    with pytest.raises(TypeError, match="hash"):
        store.put(**arguments)
    store.flush()  # nothing latched, nothing queued
    store.put([obj("a", 3)], retain_keys=["a"])
    assert store.get_concatenated(["a"]) == b"\x03" * N
    store.close()


@pytest.mark.timeout(30)
def test_str_subclass_keys_are_stored_by_value() -> None:
    inner = BlockObjectStore(max_bytes=4 * N, object_nbytes=N)
    with BackgroundBlockObjectStore(inner, max_pending_batches=1) as store:
        store.put([BlockObject(_Odd("a"), b"\x01" * N), BlockObject(_Odd("b"), b"\x02" * N)])
        assert store.get_concatenated(["b", "a"]) == b"\x02" * N + b"\x01" * N
        assert all(type(key) is str for key, _ in inner.snapshot().entries)


# ---------------------------------------------------------- dropped stores


@pytest.mark.timeout(60)
def test_a_dropped_store_is_not_kept_alive_by_its_writer() -> None:
    store = BackgroundBlockObjectStore(BlockObjectStore(max_bytes=4 * N, object_nbytes=N), max_pending_batches=1)
    store.put([obj("a")])
    writer = store._thread
    ref = weakref.ref(store)
    del store  # no cycle: freed here, by reference counting, if the writer holds no strong reference
    assert ref() is None
    writer.join(10)
    assert not writer.is_alive()


class _Logged(BlockObjectStore):
    """auxstore's store, logging the keys of every put it applies and its close."""

    def __init__(self, **sizes: int) -> None:
        super().__init__(**sizes)
        self.log: list[Any] = []

    def put(self, objects: Any, **pins: Any) -> None:
        super().put(objects, **pins)
        self.log.append([o.key for o in objects])

    def close(self) -> None:
        super().close()
        self.log.append("close")


@pytest.mark.timeout(120)
def test_200_dropped_stores_leave_no_thread_and_apply_what_they_queued() -> None:
    gc.collect()
    before = _writers()
    inners: list[_Logged] = []
    for i in range(200):
        inner = _Logged(max_bytes=4 * N, object_nbytes=N)
        inners.append(inner)
        store = BackgroundBlockObjectStore(inner, max_pending_batches=2)
        store.put([obj("a", i % 251)])
        store.put([obj("b", 7)], retain_keys=["b"])
        del store  # dropped without close, with batches perhaps still queued
    assert _wait_until(lambda: _writers() == before), f"{_writers() - before} writer threads left"
    for inner in inners:
        # Queued batches were applied, in order, then the inner store closed.
        assert inner.log == [["a"], ["b"], "close"]
    assert _writers() == before


@pytest.mark.timeout(60)
def test_a_dropped_store_in_a_cycle_stops_its_writer_once_collected() -> None:
    before = _writers()
    inner = BlockObjectStore(max_bytes=4 * N, object_nbytes=N)
    store: Any = BackgroundBlockObjectStore(inner, max_pending_batches=1)
    holder: dict[str, Any] = {"store": store}
    holder["self"] = holder  # a cycle that keeps the store until a collection
    store.put([obj("a")])
    del store, holder
    gc.collect()
    assert _wait_until(lambda: _writers() == before)
    assert inner.snapshot().closed


@pytest.mark.parametrize("inner", [None, object(), "store", mock.Mock(spec=["put", "close"])])
def test_something_that_is_not_a_store_is_refused_before_any_thread(inner: object) -> None:
    threads = threading.active_count()
    with pytest.raises(TypeError, match="store"):
        BackgroundBlockObjectStore(inner, max_pending_batches=0)  # type: ignore[arg-type]  # the store is checked first
    assert threading.active_count() == threads


# ------------------------------------------------- close, interrupted


class _Held:
    """An inner store whose put waits at a gate; logs what it applies and its close."""

    object_nbytes = N

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.log: list[Any] = []

    def put(self, objects: Any, *, retain_keys: Any = (), release_keys: Any = ()) -> None:
        self.entered.set()
        if not self.gate.wait(10):
            raise TimeoutError("the gate was never opened")
        self.log.append([o.key for o in objects])

    def get_concatenated(self, keys: list[str]) -> bytes:
        return b""

    def close(self) -> None:
        self.log.append("close")


@pytest.mark.timeout(60)
@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="signals need the main thread")
def test_a_close_interrupted_while_the_writer_applies_a_batch_waits_for_it_next_time() -> None:
    """A KeyboardInterrupt (a real SIGALRM) into close() while the writer is
    inside the inner store's put. ``Thread.join()`` interrupted so marks the
    running writer stopped (CPython < 3.13): a close that joined it then
    returned at once, latched a false WriterDiedError and closed the inner
    store under the writer's put. The next close must wait for the writer,
    apply the batch, close the inner store after it and report nothing."""
    import signal

    def alarm(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    inner = _Held()
    store = BackgroundBlockObjectStore(inner, max_pending_batches=1)
    store.put([obj("a")])
    assert inner.entered.wait(10)  # the writer is inside the inner put, held
    previous = signal.signal(signal.SIGALRM, alarm)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.2)  # lands while close() waits for the held writer
        with pytest.raises(KeyboardInterrupt):
            store.close()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert inner.log == []  # still held: nothing applied, the inner store open
    opener = threading.Timer(0.3, inner.gate.set)  # released while the next close waits
    opener.start()
    try:
        store.close()  # no failure: the writer did not die
    finally:
        opener.join(10)
    assert inner.log == [["a"], "close"]  # applied, then closed: never closed under the put
    assert _wait_until(lambda: store._thread not in threading.enumerate())
    store.close()  # closing again does nothing
    assert inner.log == [["a"], "close"]

