"""The store's rare paths: what no corpus input reaches and the other fault
tests do not either (listed in ``fuzz/coverage``'s FAULT_TESTS).

- The arena cannot be mapped (``mmap`` raises ``OSError``/``OverflowError``):
  ``MemoryError``, the chunks mapped so far are unmapped, nothing changed.
- A corrupted chunk table: ``check_invariants`` names it.
- A store broken by a put whose change could not be completed, seen from
  ``__exit__``, from ``repr`` with no Python caller, and from a put's own
  exit.
- A store misused from a second thread while one of its calls runs.
- Hostile values in messages: a ``__repr__`` returning a ``str`` subclass, a
  type whose name cannot be read.
- The background writer's orphan paths: a store dropped when its finalizer
  did not run, a writer that ended with batches not applied (seen by
  ``close`` and by the finalizer), a second latch, and a put racing a latch.
"""

from __future__ import annotations

import _thread
import functools
import gc
import inspect
import mmap
import operator
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

import pytest

import auxstore._background as background
import auxstore._batch as batch_module
import auxstore._store as store_module
from auxspec.checks import corruptions
from auxstore import (
    BackgroundBlockObjectStore,
    BlockObject,
    BlockObjectStore,
    BlockObjectStoreError,
    BrokenStoreError,
    InvariantError,
    WriterDiedError,
)
from auxstore._batch import check_batch

N = 2


def obj(key: str, fill: int = 1) -> BlockObject:
    return BlockObject(key, bytes([fill]) * N)


def _wait_until(predicate: Callable[[], bool], timeout: float = 10.0) -> bool:
    end = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > end:
            return False
        time.sleep(0.002)
    return True


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks of 4 bytes (2 slots) at first, so a small store has several."""
    monkeypatch.setattr(store_module, "_FIRST_CHUNK_BYTES", 2 * N)


# ------------------------------------------------------- mapping failures


class _FailingMmap:
    """``mmap.mmap`` that maps the first ``good`` chunks, then raises ``error``."""

    def __init__(self, good: int, error: BaseException) -> None:
        self.good, self.error = good, error
        self.made: list[mmap.mmap] = []

    def __call__(self, fileno: int, length: int) -> mmap.mmap:
        if len(self.made) >= self.good:
            raise self.error
        chunk = _REAL_MMAP(fileno, length)
        self.made.append(chunk)
        return chunk


_REAL_MMAP = mmap.mmap


@pytest.mark.parametrize("error", [OSError(12, "Cannot allocate memory"), OverflowError("too big")])
def test_a_store_whose_arena_cannot_be_mapped_is_a_memory_error(
    monkeypatch: pytest.MonkeyPatch, error: BaseException
) -> None:
    monkeypatch.setattr(mmap, "mmap", _FailingMmap(0, error))
    store = BlockObjectStore(max_bytes=8 * N, object_nbytes=N)  # maps nothing yet (issue 30)
    with pytest.raises(MemoryError, match=r"cannot map \d+ more bytes for \d+ objects") as raised:
        store.put([obj("a")])  # the first key stored maps the first chunk
    assert str(error) in str(raised.value)
    assert raised.value.__cause__ is None  # from None: the OS error is in the message
    assert "a" not in store and len(store) == 0  # and the put changed nothing
    store.check_invariants()


def test_a_put_whose_chunks_cannot_all_be_mapped_changes_nothing(
    monkeypatch: pytest.MonkeyPatch, small_chunks: None
) -> None:
    store = BlockObjectStore(max_bytes=16 * N, object_nbytes=N)
    store.put([obj("a"), obj("b")], retain_keys=["a"])  # the first chunk's 2 slots
    before = (store.snapshot(), store.stats(), list(store._chunk_starts), store._allocated)
    # 5 more keys need 2 more chunks (2 and 4 slots): the first maps, the second fails.
    failing = _FailingMmap(1, OSError(12, "Cannot allocate memory"))
    monkeypatch.setattr(mmap, "mmap", failing)
    with pytest.raises(MemoryError, match="cannot map 8 more bytes for 4 objects"):
        store.put([obj(k, 3) for k in "cdefg"], release_keys=["a"])
    assert len(failing.made) == 1 and failing.made[0].closed  # the chunk mapped for it is unmapped
    assert (store.snapshot(), store.stats(), list(store._chunk_starts), store._allocated) == before
    store.check_invariants()
    monkeypatch.setattr(mmap, "mmap", _REAL_MMAP)
    store.put([obj(k, 3) for k in "cdefg"], release_keys=["a"])  # the store is usable: it was not broken
    assert len(store) == 7 and len(store._chunks) == 3
    assert store.get_concatenated(["b", "c", "g"]) == obj("b").payload + obj("c", 3).payload * 2
    store.check_invariants()
    store.close()


# ---------------------------------------------------------- chunk table


def _stores(small_chunks: None) -> Iterator[BlockObjectStore]:
    """Stores in the states a chunk corruption must handle: one chunk with
    room, several chunks, every slot mapped."""
    one = BlockObjectStore(max_bytes=16 * N, object_nbytes=N)
    one.put([obj("a")])
    yield one
    several = BlockObjectStore(max_bytes=16 * N, object_nbytes=N)
    several.put([obj(k) for k in "abcde"])
    assert len(several._chunks) == 3
    yield several
    full = BlockObjectStore(max_bytes=4 * N, object_nbytes=N)
    full.put([obj(k) for k in "abcd"])
    assert full._allocated == full.capacity
    yield full


@pytest.mark.parametrize(
    ("corruption", "words"),
    [
        (corruptions.CHUNK_TABLE[0], "the chunk table is inconsistent"),
        (corruptions.CHUNK_TABLE[1], "the chunk of slots"),
        (corruptions.CHUNK_TABLE[2], "slots mapped for"),
    ],
)
def test_check_invariants_names_a_corrupted_chunk_table(
    small_chunks: None, corruption: Callable[[Any], None], words: str
) -> None:
    for store in _stores(small_chunks):
        store.check_invariants()  # intact first
        corruption(store)
        with pytest.raises(InvariantError, match=words):
            store.check_invariants()


def test_check_invariants_names_a_chunk_table_corrupted_before_anything_is_mapped() -> None:
    # Nothing is mapped before the first put that stores a key: a start, a mapped slot or a slot in use
    # without a chunk is the chunk table's inconsistency, whatever the corruption meant to break.
    for corruption in corruptions.CHUNK_TABLE:
        store = BlockObjectStore(max_bytes=16 * N, object_nbytes=N)
        store.put([], retain_keys=["a"])  # a pin before data maps nothing either
        assert not store._chunks and store._arena is None
        store.check_invariants()  # intact first
        corruption(store)
        with pytest.raises(InvariantError, match="the chunk table is inconsistent"):
            store.check_invariants()


def test_check_invariants_catches_every_store_corruption_with_several_chunks(small_chunks: None) -> None:
    for corruption in (*corruptions.STORE, *corruptions.CHUNK_TABLE):
        for store in _stores(small_chunks):
            corruption(store)
            with pytest.raises(InvariantError):
                store.check_invariants()


def test_objects_bigger_than_the_first_chunk_get_chunks_of_at_least_one_slot(monkeypatch: pytest.MonkeyPatch) -> None:
    # _FIRST_CHUNK_BYTES (1 GiB) smaller than one object: each chunk still
    # holds a slot. Mutant (seed 5, _Growth.plan__mutmut_15, the floor of one
    # slot dropped): the chunk was 0 bytes, so no store of objects over 1 GiB
    # could be made (mmap refuses a length of 0).
    monkeypatch.setattr(store_module, "_FIRST_CHUNK_BYTES", N)
    big = 2 * N
    store = BlockObjectStore(max_bytes=3 * big, object_nbytes=big)
    store.put([BlockObject(k, k.encode() * big) for k in "abc"])  # how many chunks is not the point
    assert store.get_concatenated(["c", "a"]) == b"c" * big + b"a" * big
    store.check_invariants()
    store.close()


def test_a_slot_made_past_the_mapped_chunks_maps_one_more(small_chunks: None) -> None:
    store = BlockObjectStore(max_bytes=8 * N, object_nbytes=N)
    store.put([obj("a"), obj("b")])
    assert store._allocated == 2 and len(store._chunks) == 1
    corruptions.STORE[corruptions.STORE.index(corruptions._slot_no_key_holds)](store)  # store._new_slot()
    assert store._made == 3 and store._allocated == 4 and len(store._chunks) == 2
    with pytest.raises(InvariantError, match="1 of 3 allocated slots hold no key"):
        store.check_invariants()
    assert store.get_concatenated(["a", "b"]) == obj("a").payload * 2


# ------------------------------------------------------------- broken


def _break(store: BlockObjectStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """A put whose change fails, and fails again when it is completed: the
    "put!" mark stays, the store is broken."""

    def fails(self: BlockObjectStore, plan: object) -> None:
        raise MemoryError("no memory to apply the put")

    with monkeypatch.context() as patch:
        patch.setattr(BlockObjectStore, "_apply_put", fails)
        patch.setattr(BlockObjectStore, "_apply_simple_put", fails)  # a put of new keys only
        with pytest.raises(MemoryError):
            store.put([obj("x")])
    assert store._gate == "put!"


def test_a_store_broken_inside_a_with_block_raises_broken_at_its_end(monkeypatch: pytest.MonkeyPatch) -> None:
    store = BlockObjectStore(max_bytes=4 * N, object_nbytes=N)
    with pytest.raises(BrokenStoreError, match=r"interrupted put\(\)"), store:
        store.put([obj("a")])
        _break(store, monkeypatch)
        # the block itself ends normally: __exit__ has no exception to let through, so it raises
    with pytest.raises(BrokenStoreError):
        store.get_concatenated(["a"])
    assert store.snapshot().entries == (("a", obj("a").payload),)  # what is left, for a post-mortem


def _from_a_bare_thread(call: Callable[[], object]) -> object:
    """``call()`` on a thread started by C, with no Python frame below it
    (a callback from C code). The chain is C all along: ``list.extend`` runs
    ``map(operator.call, ...)``, which installs the thread tracer of
    ``threading.settrace`` (coverage's, when it measures) and then calls
    ``call``. ``call`` must return, not raise (a raise would be lost)."""
    results: list[object] = []
    steps: list[Callable[[], object]] = [functools.partial(sys.settrace, threading.gettrace()), call]
    calls: Callable[[Callable[[], object]], object] = operator.call
    _thread.start_new_thread(results.extend, (map(calls, steps),))
    assert _wait_until(lambda: len(results) == 2)
    return results[1]


def test_a_broken_store_says_so_in_its_repr_even_with_no_python_caller(monkeypatch: pytest.MonkeyPatch) -> None:
    store = BlockObjectStore(max_bytes=4 * N, object_nbytes=N)
    _break(store, monkeypatch)
    # repr is the first Python frame of that thread: the stack walk has no caller to start from.
    shown = _from_a_bare_thread(store.__repr__)
    assert isinstance(shown, str) and "broken by an interrupted put()" in shown
    with pytest.raises(BrokenStoreError):
        store.flush()


def test_a_stale_mark_seen_with_no_python_caller_is_cleared() -> None:
    store = BlockObjectStore(max_bytes=4 * N, object_nbytes=N)
    store.put([obj("a")])
    store._gate = "get_concatenated"  # a read interrupted before its changes: consistent
    assert _from_a_bare_thread(store.flush) is None
    assert store._gate is None
    assert store.get_concatenated(["a"]) == obj("a").payload


def test_the_gate_check_of_an_idle_store_lets_the_call_run() -> None:
    # Every call checks the gate inline and calls _blocked only when it is set;
    # _blocked itself must still let a call through when it is not.
    store = BlockObjectStore(max_bytes=4 * N, object_nbytes=N)
    store.put([obj("a")])
    store._blocked("put")  # returns: nothing blocks it
    assert store._gate is None
    store.put([obj("b")])
    assert store.snapshot().entries == (("a", obj("a").payload), ("b", obj("b").payload))


class _ClosesFromAnotherThread(str):
    """A key whose ``__hash__`` closes the store from a second thread (misuse:
    the store is for one thread at a time)."""

    store: BlockObjectStore | None = None

    def __hash__(self) -> int:
        assert self.store is not None
        closer = threading.Thread(target=self.store.close)
        closer.start()
        closer.join()
        return str.__hash__(self)


def test_a_membership_test_does_not_reopen_a_store_closed_meanwhile() -> None:
    store = BlockObjectStore(max_bytes=4 * N, object_nbytes=N)
    store.put([obj("a")])
    _ClosesFromAnotherThread.store = store
    try:
        assert _ClosesFromAnotherThread("a") not in store  # closed while it ran: nothing is stored
    finally:
        _ClosesFromAnotherThread.store = None
    # Its exit left the closed mark alone (clearing it would reopen an unmapped store).
    assert store._gate == "closed"
    with pytest.raises(RuntimeError, match="closed"):
        store.get_concatenated(["a"])
    assert store.snapshot().closed


def test_a_put_does_not_reopen_a_store_closed_as_it_returns() -> None:
    """A second thread closes the store between the put's change and its
    exit (misuse, as above); the put's exit leaves the closed mark alone. The
    moment is reached with a profile hook (``sys.setprofile``), which leaves
    line tracing (and coverage) alone."""
    store = BlockObjectStore(max_bytes=4 * N, object_nbytes=N)
    put_body = BlockObjectStore._put_simple.__code__  # the change of a put of new keys only
    closed: list[bool] = []

    def close_when_the_change_returns(frame: FrameType, event: str, arg: object) -> None:
        if event == "return" and frame.f_code is put_body and not closed:
            closer = threading.Thread(target=store.close)
            closer.start()
            closer.join()
            closed.append(True)

    previous = sys.getprofile()
    sys.setprofile(close_when_the_change_returns)
    try:
        store.put([obj("a")])
    finally:
        sys.setprofile(previous)
    assert closed == [True]
    assert store._gate == "closed"
    with pytest.raises(RuntimeError, match="closed"):
        store.put([obj("b")])
    assert store.snapshot() == ((), (), True)


# --------------------------------------------------------- hostile values


class _StrSubclass(str):
    pass


class _ReprIsAStrSubclass:
    def __repr__(self) -> str:
        return _StrSubclass("looks like a key")  # repr() allows a str subclass


def test_a_repr_that_returns_a_str_subclass_is_not_shown() -> None:
    store = BlockObjectStore(max_bytes=4 * N, object_nbytes=N)
    with pytest.raises(TypeError) as raised:
        store.put([BlockObject(_ReprIsAStrSubclass(), b"aa")])  # type: ignore[arg-type]
    assert str(raised.value) == "key must be a str; got <_ReprIsAStrSubclass object> of type _ReprIsAStrSubclass"
    assert len(store) == 0


def test_a_str_is_shown_by_its_repr_cut_to_the_limit() -> None:
    assert batch_module.safe_repr("k'0") == repr("k'0")
    long = batch_module.safe_repr("x" * 200, limit=20)
    assert long == ("'" + "x" * 16 + "...") and len(long) == 20


class _BrokenNameGetter:
    def __get__(self, instance: object, owner: object = None) -> str:
        raise MemoryError("no memory for a type's name")


class _TypeWithBrokenName:
    """Stands in for ``type`` in auxstore._batch: its ``__name__`` getter fails,
    as type's own can only under memory exhaustion."""

    __dict__ = {"__name__": _BrokenNameGetter()}  # a fake type's namespace

    def __call__(self, value: object) -> type:
        return type(value)


def test_a_type_whose_name_cannot_be_read_is_unnamed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batch_module, "type", _TypeWithBrokenName(), raising=False)
    assert batch_module.type_name(3) == "<unnamed type>"
    store = BlockObjectStore(max_bytes=4 * N, object_nbytes=N)
    with pytest.raises(TypeError, match=r"^key must be a str; got 3 of type <unnamed type>$"):
        store.put([BlockObject(3, b"aa")])  # type: ignore[arg-type]
    monkeypatch.undo()
    assert len(store) == 0


# ---------------------------------------------------------- the writer


class _Inner:
    """An inner store logging what it applies; ``fail`` names a key whose put
    raises, after ``gate`` is set."""

    def __init__(self, fail: str | None = None) -> None:
        self.log: list[Any] = []
        self.fail = fail
        self.gate = threading.Event()
        self.gate.set()

    def put(self, objects: list[Any], *, retain_keys: Any = (), release_keys: Any = ()) -> None:
        keys = [o.key for o in objects]
        if self.fail in keys:
            assert self.gate.wait(10)
            raise ValueError(f"inner store refuses {self.fail}")
        self.log.append(keys)

    def get_concatenated(self, keys: list[str]) -> bytes:
        return b""

    def close(self) -> None:
        self.log.append("close")


def _finalizer_of(shared: object) -> Any:
    found = [f for f in list(weakref.finalize._registry) if shared in (f.peek() or (None, None, ()))[2]]  # type: ignore[attr-defined]
    assert len(found) == 1
    return found[0]


@pytest.mark.timeout(30)
def test_a_dropped_store_whose_finalizer_did_not_run_is_stopped_by_its_writer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(background, "_WRITER_POLL", 0.01)
    inner = _Inner()
    store = BackgroundBlockObjectStore(inner, max_pending_batches=2)
    shared, writer = store._s, store._thread
    store.put([obj("a")])
    store.put([obj("b")], retain_keys=["b"])
    store.flush()
    time.sleep(0.05)  # several polls with the store alive: the writer keeps waiting
    assert writer.is_alive() and not shared.stopping
    _finalizer_of(shared).detach()  # as if the finalizer never ran (or was interrupted)
    store.put([obj("c")])  # perhaps still queued when the store is dropped
    ref = weakref.ref(store)
    del store
    gc.collect()
    assert ref() is None
    writer.join(10)
    assert not writer.is_alive()
    # The writer noticed by itself: what was queued was applied, then the inner store closed, once.
    assert shared.dropped and shared.stopping
    assert inner.log == [["a"], ["b"], ["c"], "close"]
    # A finalizer running after all finds the inner store closed: not closed again.
    background._dropped(shared, writer)
    background._close_orphan(shared)
    assert inner.log == [["a"], ["b"], ["c"], "close"]


def _dead_writer(shared: Any) -> None:
    """A writer body that ends at once, leaving no word (as a writer killed
    before it latched anything would)."""


@pytest.mark.timeout(30)
def test_close_reports_a_writer_that_ended_with_batches_not_applied(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(background, "_write", _dead_writer)
    inner = _Inner()
    store = BackgroundBlockObjectStore(inner, max_pending_batches=1)
    store._thread.join(10)
    store.put([obj("a")])  # room for one: queued without waiting, never applied
    with pytest.raises(BlockObjectStoreError, match="ended with batches not applied") as raised:
        store.close()
    assert isinstance(raised.value.__cause__, WriterDiedError)
    assert inner.log == ["close"]  # nothing applied; the inner store closed
    store.close()  # reported once
    assert inner.log == ["close"]


@pytest.mark.timeout(30)
def test_a_dropped_store_whose_writer_ended_latches_what_it_left_and_closes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(background, "_write", _dead_writer)
    inner = _Inner()
    store = BackgroundBlockObjectStore(inner, max_pending_batches=1)
    shared, writer = store._s, store._thread
    writer.join(10)
    store.put([obj("a")])
    del store  # the finalizer runs here: the writer is gone, so it closes the inner store itself
    assert shared.dropped and not shared.queue
    assert isinstance(shared.error, WriterDiedError) and "not applied" in str(shared.error)
    assert inner.log == ["close"]


def test_a_second_failure_does_not_replace_the_first() -> None:
    shared = background._Shared(_Inner(), 1)
    first, second = ValueError("first"), WriterDiedError("second")
    shared.queue.append(check_batch([obj("a")], object_nbytes=None))
    shared.latch(first)
    shared.queue.append(check_batch([obj("b")], object_nbytes=None))
    shared.latch(second)
    assert shared.error is first and not shared.queue and not shared.busy


def _line_of(function: Callable[..., object], text: str) -> int:
    lines, start = inspect.getsourcelines(function)
    matches = [start + i for i, line in enumerate(lines) if text in line]
    assert len(matches) == 1, matches
    return matches[0]


@pytest.mark.timeout(30)
def test_a_put_racing_a_latch_is_skipped() -> None:
    """The writer latches a failure between a put's check of the latch and its
    append: the put returns (the failure was in flight), and its batch is
    skipped, behind the failure, as the model says."""
    inner = _Inner(fail="a")
    inner.gate.clear()
    store = BackgroundBlockObjectStore(inner, max_pending_batches=4)
    shared = store._s
    store.put([obj("a")])  # fails once the gate opens
    assert _wait_until(lambda: shared.busy)
    append = _line_of(BackgroundBlockObjectStore.put, "queue.append(batch)")
    put_code = BackgroundBlockObjectStore.put.__code__

    def pause_before_append(frame: FrameType, event: str, arg: object) -> Any:
        if frame.f_code is not put_code:
            return None
        if event == "line" and frame.f_lineno == append:
            inner.gate.set()  # the writer fails now, after this put saw no failure
            assert _wait_until(lambda: shared.error is not None and shared.writer_waits)
        return pause_before_append

    previous = sys.gettrace()
    sys.settrace(pause_before_append)
    try:
        store.put([obj("b")])  # returns: it saw no failure
    finally:
        sys.settrace(previous)
    with pytest.raises(BlockObjectStoreError, match="refuses a"):
        store.flush()
    with pytest.raises(BlockObjectStoreError):
        store.close()
    assert inner.log == ["close"]  # b is behind the failure: never applied


@pytest.mark.timeout(30)
def test_a_writer_whose_put_sees_a_failure_latched_meanwhile_skips_the_rest() -> None:
    """A failure latched while the writer applies a batch (by the owner, which
    latches a writer it believes dead): the writer drops what is queued."""
    inner = _Inner()
    store = BackgroundBlockObjectStore(inner, max_pending_batches=4)
    shared = store._s
    applying, resume = threading.Event(), threading.Event()
    real_put = inner.put

    def slow_put(objects: list[Any], **pins: Any) -> None:
        if [o.key for o in objects] == ["a"]:
            applying.set()
            assert resume.wait(10)
        real_put(objects, **pins)

    inner.put = slow_put  # type: ignore[method-assign]
    store.put([obj("a")])
    assert applying.wait(10)
    store.put([obj("b")])
    store.put([obj("c")])
    shared.latch(WriterDiedError("latched by the owner"))  # as _wait does for a writer it saw dead
    resume.set()
    with pytest.raises(BlockObjectStoreError, match="latched by the owner"):
        store.close()
    assert inner.log == [["a"], "close"]  # b and c were dropped
