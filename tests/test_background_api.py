"""auxstore's BackgroundBlockObjectStore: constructor, validation on the
owner thread, snapshots, the writer thread's life, and the extensions."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from auxspec.drivers import gated
from auxspec.reference import background as bgref
from auxstore import BackgroundBlockObjectStore, BlockObject, BlockObjectStore, BlockObjectStoreError

N = 4


def obj(key: str, fill: int = 1) -> BlockObject:
    return BlockObject(key, bytes([fill]) * N)


def _gate(capacity: int = 4, inner: Any = None) -> gated.GatedStore:
    inner = inner or BlockObjectStore(max_bytes=capacity * N, object_nbytes=N)
    return gated.GatedStore(inner, lambda store: store.snapshot(), timeout=10.0)


@pytest.mark.parametrize(
    ("bound", "error"),
    [(0, ValueError), (-1, ValueError), (1.5, TypeError), ("2", TypeError), (True, TypeError), (None, TypeError)],
)
def test_max_pending_batches_is_an_int_of_at_least_one(bound: Any, error: type[Exception]) -> None:
    threads = threading.active_count()
    inner = BlockObjectStore(max_bytes=4 * N, object_nbytes=N)
    with pytest.raises(error):
        BackgroundBlockObjectStore(inner, max_pending_batches=bound)
    assert threading.active_count() == threads  # no writer was started
    # The reference agrees.
    with pytest.raises(error):
        bgref.ReferenceBackgroundStore({"max_bytes": 4 * N, "object_nbytes": N}, max_pending_batches=bound)


@pytest.mark.timeout(30)
def test_the_writer_thread_is_named_daemon_and_joined_on_close() -> None:
    threads = threading.active_count()
    store = BackgroundBlockObjectStore(BlockObjectStore(max_bytes=4 * N, object_nbytes=N), max_pending_batches=1)
    writers = [t for t in threading.enumerate() if t.name == "auxstore-background-writer"]
    assert len(writers) == 1 and writers[0].daemon and writers[0].is_alive()
    assert threading.active_count() == threads + 1
    store.put([obj("a")])
    store.close()
    assert not writers[0].is_alive()
    assert threading.active_count() == threads


BAD_PUTS: list[tuple[str, dict[str, Any], type[Exception]]] = [
    ("str key list", {"objects": [obj("a")], "retain_keys": "ab"}, TypeError),
    ("int key", {"objects": [BlockObject(1, b"\x00" * N)]}, TypeError),  # type: ignore[arg-type]
    ("short payload", {"objects": [BlockObject("a", b"\x00")]}, ValueError),
    ("str payload", {"objects": [BlockObject("a", "abcd")]}, TypeError),  # type: ignore[arg-type]
    ("no key attribute", {"objects": [b"abcd"]}, TypeError),
    ("batch not iterable", {"objects": 3}, TypeError),
    ("release key not str", {"objects": [], "release_keys": [None]}, TypeError),
]


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("what", "arguments", "error"), BAD_PUTS, ids=[b[0] for b in BAD_PUTS])
def test_bad_input_fails_at_the_call_with_nothing_queued(
    what: str, arguments: dict[str, Any], error: type[Exception]
) -> None:
    gate = _gate()
    gate.open()
    with BackgroundBlockObjectStore(gate, max_pending_batches=2) as store:
        store.put([obj("a")])
        store.flush()
        with pytest.raises(error):
            store.put(**arguments)
        store.flush()  # nothing latched
        assert gate.entered == 1  # nothing queued
        store.put([obj("b")])
        assert store.get_concatenated(["a", "b"]) == b"\x01" * 2 * N


@pytest.mark.timeout(30)
def test_the_batch_is_a_snapshot() -> None:
    gate = _gate()
    store = BackgroundBlockObjectStore(gate, max_pending_batches=4)
    payload = bytearray(b"\x05" * N)

    class Mutable:  # a caller's own object type, changed after the call
        def __init__(self) -> None:
            self.key, self.payload = "m", b"\x06" * N

    mutable = Mutable()
    objects: list[Any] = [BlockObject("a", payload), mutable]  # type: ignore[arg-type]
    retains = ["a"]
    store.put(objects, retain_keys=retains)
    # The writer has not applied it yet; scribble over everything.
    payload[:] = b"\xff" * N
    mutable.key, mutable.payload = "zz", b"\x00" * N
    objects.append(obj("sneaky"))
    retains.append("sneaky")
    gate.open()
    assert store.get_concatenated(["a", "m"]) == b"\x05" * N + b"\x06" * N
    assert "sneaky" not in store and "zz" not in store
    assert gate._inner.snapshot().references == (("a", 1),)
    store.close()


@pytest.mark.timeout(30)
def test_put_returns_once_queued_and_reads_wait() -> None:
    gate = _gate()
    store = BackgroundBlockObjectStore(gate, max_pending_batches=2)
    store.put([obj("a")])  # returns while the writer is held
    assert gate.wait_for("entered", 1) and gate.finished == 0
    done: list[bytes] = []
    reader = threading.Thread(target=lambda: done.append(store.get_concatenated(["a"])))
    reader.start()
    reader.join(0.05)
    assert reader.is_alive() and not done  # waiting for the queue
    gate.release(1)
    reader.join(5)
    assert done == [b"\x01" * N]
    store.close()


@pytest.mark.timeout(30)
def test_backpressure_allows_bound_plus_one_outstanding() -> None:
    gate = _gate()
    store = BackgroundBlockObjectStore(gate, max_pending_batches=2)
    store.put([obj("a")])
    assert gate.wait_for("entered", 1)  # taken: the one being applied
    store.put([obj("b")])
    store.put([obj("c")])  # 3 outstanding: 1 applying + 2 waiting
    blocked = threading.Thread(target=store.put, args=([obj("d")],))
    blocked.start()
    blocked.join(0.05)
    assert blocked.is_alive()  # the fourth waits
    gate.release(1)
    blocked.join(5)
    assert not blocked.is_alive()
    gate.open()
    assert len(store) == 4
    store.close()


@pytest.mark.timeout(30)
def test_extensions_read_into_len_in_stats_and_context_manager() -> None:
    gate = _gate()
    gate.open()
    with BackgroundBlockObjectStore(gate, max_pending_batches=1) as store:
        store.put([obj("a", 1), obj("b", 2)], retain_keys=["a"])
        buffer = bytearray(3 * N)
        assert store.read_into(["b", "a"], buffer) == 2 * N
        assert bytes(buffer) == b"\x02" * N + b"\x01" * N + b"\x00" * N
        with pytest.raises(ValueError):
            store.read_into(["a", "b"], bytearray(N))  # short buffer: nothing changes
        assert len(store) == 2 and "a" in store and "c" not in store
        stats = store.stats()
        assert (stats.stored, stats.pinned, stats.hits) == (2, 1, 2)
    assert gate.closes == 1
    with pytest.raises(RuntimeError):
        store.flush()
    with pytest.raises(RuntimeError), store:
        pass


@pytest.mark.timeout(30)
def test_read_into_needs_an_inner_store_with_it() -> None:
    # vLLM's store has no read_into, and no way to tell a missing key from a
    # short buffer without moving the keys it reads: no emulation, and the
    # store is still usable afterwards.
    target = gated.upstream_target()
    if target is None:
        pytest.skip("vLLM's module is absent")
    inner = target.factory(4 * N, N)
    with BackgroundBlockObjectStore(inner, max_pending_batches=1) as store:
        store.put([obj("a", 7)])
        with pytest.raises(AttributeError, match="read_into"):
            store.read_into(["a"], bytearray(N))
        assert store.get_concatenated(["a"]) == b"\x07" * N


@pytest.mark.timeout(30)
def test_close_is_idempotent_and_empty_put_is_a_no_op_after_it() -> None:
    store = BackgroundBlockObjectStore(BlockObjectStore(max_bytes=4 * N, object_nbytes=N), max_pending_batches=1)
    store.close()
    store.close()
    store.put([], retain_keys=(), release_keys=[])
    with pytest.raises(RuntimeError) as closed:
        store.put([obj("a")])
    assert type(closed.value) is RuntimeError  # closed, not a latched failure
    for call in (lambda: store.get_concatenated(["a"]), lambda: len(store), store.stats):
        with pytest.raises(RuntimeError):
            call()


@pytest.mark.timeout(30)
def test_a_latched_failure_is_chained_to_its_cause() -> None:
    store = BackgroundBlockObjectStore(BlockObjectStore(max_bytes=1 * N, object_nbytes=N), max_pending_batches=1)
    store.put([], release_keys=["nobody"])
    with pytest.raises(BlockObjectStoreError) as raised:
        store.flush()
    assert isinstance(raised.value.__cause__, KeyError)  # UnreferencedKeyError
    with pytest.raises(BlockObjectStoreError):
        store.close()
    store.close()
