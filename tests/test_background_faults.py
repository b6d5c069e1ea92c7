"""Fault injection: the inner store raises while the writer applies a batch.

In every case: nothing hangs (each test has a timeout, every wait has one),
nothing is lost silently (the failure surfaces at every later call and at
close, chained to its cause), batches behind the failure never reach the
inner store, and no thread outlives close.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Any

import pytest

from auxspec.drivers import gated
from auxspec.engine import ops as alphabet
from auxspec.generators import background as scen
from auxstore import (
    BackgroundBlockObjectStore,
    BlockObject,
    BlockObjectStore,
    BlockObjectStoreError,
    CapacityError,
    _background,
)
from auxstore._background import WriterDiedError
from auxstore._batch import check_batch

N = 4  # object_nbytes


def obj(key: str, fill: int = 1) -> BlockObject:
    return BlockObject(key, bytes([fill]) * N)


class Custom(Exception):
    pass


FAULTS: dict[str, Callable[[], BaseException]] = {
    "MemoryError": lambda: MemoryError("injected"),
    "OSError": lambda: OSError(5, "injected I/O error"),
    "arbitrary": lambda: Custom("injected"),
    "KeyboardInterrupt": lambda: KeyboardInterrupt(),
}


def _gated(capacity: int = 4, faults: dict[int, Callable[[], BaseException]] | None = None) -> gated.GatedStore:
    inner = BlockObjectStore(max_bytes=capacity * N, object_nbytes=N)
    return gated.GatedStore(inner, lambda store: store.snapshot(), faults=faults, timeout=10.0)


def _assert_latched(call: Callable[[], object], cause: BaseException) -> None:
    with pytest.raises(BlockObjectStoreError) as raised:
        call()
    assert raised.value.__cause__ is cause


def _check_failed_store(store: BackgroundBlockObjectStore, gate: gated.GatedStore, cause: BaseException) -> None:
    """Every later call reports the failure; close once; then nothing is left."""
    _assert_latched(lambda: store.put([obj("later")]), cause)
    _assert_latched(lambda: store.get_concatenated([]), cause)
    _assert_latched(lambda: store.read_into([], bytearray(0)), cause)
    _assert_latched(store.flush, cause)
    _assert_latched(lambda: len(store), cause)
    _assert_latched(store.close, cause)
    store.close()  # idempotent: the failure is raised once
    with pytest.raises(RuntimeError):
        store.get_concatenated([])
    store.put([])  # all-empty stays a no-op


@pytest.mark.timeout(30)
@pytest.mark.parametrize("name", [*FAULTS, "capacity"])
def test_a_failing_put_is_latched_and_skips_the_rest(name: str) -> None:
    threads = threading.active_count()
    gate = _gated(capacity=1, faults={} if name == "capacity" else {1: FAULTS[name]})
    store = BackgroundBlockObjectStore(gate, max_pending_batches=2)
    # Queued while the writer is held at the gate, so no put can see the failure yet.
    store.put([obj("a")])
    assert gate.wait_for("entered", 1)
    # Batch 1 fails: injected, or two protected keys in a store of one.
    store.put([obj("b"), obj("c")] if name == "capacity" else [obj("b")])
    store.put([obj("d")])  # behind the failure: must be skipped
    releaser = threading.Timer(0.01, gate.open)
    releaser.start()
    with pytest.raises(BlockObjectStoreError) as raised:
        store.flush()
    releaser.join(5)
    cause = raised.value.__cause__
    assert cause is not None and gate.raised[0][0] is cause
    assert isinstance(cause, CapacityError if name == "capacity" else type(FAULTS[name]()))
    assert gate.entered == 2  # batch 2 never reached the inner store
    before_close = gate._inner.snapshot()
    assert [key for key, _ in before_close.entries] == ["a"]  # strict: the failed batch changed nothing
    _check_failed_store(store, gate, cause)
    assert gate.closes == 1 and gate.final == before_close
    assert threading.active_count() == threads


@pytest.mark.timeout(30)
@pytest.mark.parametrize("name", list(FAULTS))
def test_close_with_a_failing_batch_still_queued(name: str) -> None:
    threads = threading.active_count()
    gate = _gated(faults={0: FAULTS[name]})
    store = BackgroundBlockObjectStore(gate, max_pending_batches=3)
    store.put([obj("a")])
    store.put([obj("b")])  # queued behind the failing batch
    assert gate.wait_for("entered", 1)
    releaser = threading.Timer(0.01, gate.release, args=(5,))
    releaser.start()
    with pytest.raises(BlockObjectStoreError) as raised:
        store.close()  # must wait for the failing batch, not drop it
    releaser.join(5)
    assert isinstance(raised.value.__cause__, type(FAULTS[name]()))
    assert gate.entered == 1 and gate.closes == 1
    store.close()
    assert threading.active_count() == threads


@pytest.mark.timeout(30)
@pytest.mark.parametrize("name", [*FAULTS, "capacity"])
def test_owner_blocked_on_a_full_queue_while_the_writer_fails(name: str) -> None:
    threads = threading.active_count()
    gate = _gated(capacity=1, faults={} if name == "capacity" else {0: FAULTS[name]})
    store = BackgroundBlockObjectStore(gate, max_pending_batches=1)
    store.put([obj("x"), obj("y")] if name == "capacity" else [obj("a")])  # the writer holds it at the gate
    assert gate.wait_for("entered", 1)
    store.put([obj("b")])  # the one waiting slot
    fired = threading.Event()

    def release() -> None:
        fired.set()
        gate.release(1)

    releaser = threading.Timer(0.05, release)
    releaser.start()
    # The queue is full: this put blocks until the writer moves, and the
    # writer fails instead. The owner must wake up and be told.
    with pytest.raises(BlockObjectStoreError) as raised:
        store.put([obj("c")])
    assert fired.is_set(), "put returned while the queue was full"
    releaser.join(5)
    cause = raised.value.__cause__
    assert cause is not None and gate.raised[0][0] is cause
    assert gate.entered == 1  # b and c never reached the inner store
    _check_failed_store(store, gate, cause)
    assert threading.active_count() == threads


@pytest.mark.timeout(30)
def test_vllm_latches_the_same_faults() -> None:
    """The same failures on vLLM's background store, under the upstream spec."""
    target = gated.upstream_target()
    if target is None:
        pytest.skip("vLLM's module (../shared/upstream/vllm_store.py or $AUXSTORE_UPSTREAM) is absent")
    ops = (
        alphabet.Put((("a", b"\x01\x01"),)),
        alphabet.Put((("b", b"\x02\x02"),)),
        alphabet.Put((("c", b"\x03\x03"),)),
        scen.Release(1),
        alphabet.Get(("a",)),
    )
    for index in range(3):
        for fault in FAULTS.values():
            scenario = scen.Scenario("upstream", 4, 2, 2, ops, faults=((index, fault),))
            report = gated.run_scenario(target, scenario)
            assert report.inner_calls == index + 1  # stopped at the fault



class _BrokenQueue(deque):  # type: ignore[type-arg]
    """A queue whose pop fails: a fault in the writer's own loop, not in the inner store."""

    def popleft(self) -> Any:
        raise Custom("injected into the writer's loop")


@pytest.mark.timeout(30)
def test_a_writer_whose_own_loop_fails_is_latched_not_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    threads = threading.active_count()
    monkeypatch.setattr(_background, "deque", _BrokenQueue)
    inner = BlockObjectStore(max_bytes=4 * N, object_nbytes=N)
    store = BackgroundBlockObjectStore(inner, max_pending_batches=1)
    store.put([obj("a")])  # the writer dies taking it
    with pytest.raises(BlockObjectStoreError) as raised:
        store.flush()
    cause = raised.value.__cause__
    assert isinstance(cause, Custom)
    _assert_latched(lambda: store.put([obj("b")]), cause)  # the queue is full of a dead writer's work
    _assert_latched(store.close, cause)
    assert inner.snapshot().closed  # closed, not half-closed
    store.close()
    assert threading.active_count() == threads


@pytest.mark.timeout(30)
def test_a_wake_up_lost_between_queueing_and_notifying_is_repaired(monkeypatch: pytest.MonkeyPatch) -> None:
    # The writer's own periodic re-check is pushed out of reach, so only the
    # owner's repair can wake it.
    monkeypatch.setattr(_background, "_WRITER_POLL", 3600.0)
    inner = BlockObjectStore(max_bytes=4 * N, object_nbytes=N)
    store = BackgroundBlockObjectStore(inner, max_pending_batches=2)
    shared = store._s
    for _ in range(1000):  # until the writer sleeps
        if shared.writer_waits:
            break
        threading.Event().wait(0.005)
    assert shared.writer_waits
    # What a put interrupted after its append and before its wake-up leaves.
    shared.queue.append(check_batch([obj("a", 9)], object_nbytes=N))
    store.flush()  # must wake the writer, not wait for it forever
    assert store.get_concatenated(["a"]) == b"\x09" * N
    store.close()


@pytest.mark.timeout(30)
def test_a_writer_that_vanished_without_a_word_is_latched(monkeypatch: pytest.MonkeyPatch) -> None:
    # The writer's body ends at once, before its last-resort handler can run
    # (as an exception at its first line would): nothing is latched by it.
    monkeypatch.setattr(_background, "_write", lambda shared: None)
    inner = BlockObjectStore(max_bytes=4 * N, object_nbytes=N)
    store = BackgroundBlockObjectStore(inner, max_pending_batches=1)
    store.put([obj("a")])  # fills the queue: nobody takes it
    with pytest.raises(BlockObjectStoreError) as raised:
        store.put([obj("b")])  # must not wait forever for room
    assert isinstance(raised.value.__cause__, WriterDiedError)
    with pytest.raises(BlockObjectStoreError):
        store.close()
    assert inner.snapshot().closed
