"""Every message auxstore can raise or show, compared in full.

A user reads these texts to find out what went wrong (which argument, which
key, which type, how many keys), and vLLM users search for the phrases kept
from vLLM. So each message is compared whole (``==``), with every value
formatted into it chosen to differ from its neighbours: a change to the
words, a lost message (``TypeError(None)``), or a wrong value or name in it
fails here. The sites already compared in full elsewhere in the fast suite
(``check_invariants``' messages in ``test_mutation_invariants.py``, the
unnamed type and a repr returning a ``str`` subclass in
``test_store_rare_paths.py``) are not repeated.

Reentrant calls are found by the code objects of the running calls, which
mutmut's trampolines replace, so those tests skip under them; the plain-copy
run (``tools/mutation/run_suite.py --plain``) and ordinary runs check them.
"""

from __future__ import annotations

import mmap
import sys
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

import pytest

import auxstore._background as background
from auxstore import (
    BackgroundBlockObjectStore,
    BlockObject,
    BlockObjectStore,
    BlockObjectStoreError,
    BrokenStoreError,
    CapacityError,
    MissingKeyError,
    ReentrantCallError,
    UnreferencedKeyError,
    WriterDiedError,
)

N = 2  # bytes per object: so a count of objects and of bytes differ
CLOSED = "auxiliary output store is closed"

# mutmut runs every function through one shared trampoline, so the store's
# calls are no longer their own code objects and a reentrant call is not found.
TRAMPOLINED = BlockObjectStore.put.__code__.co_name != "put" or BackgroundBlockObjectStore.put.__code__.co_name != "put"
needs_own_code_objects = pytest.mark.skipif(
    TRAMPOLINED, reason="mutmut's trampolines replace the code objects by which a reentrant call is found"
)


def obj(key: str) -> BlockObject:
    return BlockObject(key, key.encode()[:1] * N)


def _message(call: Callable[[], object], kind: type[BaseException]) -> str:
    """The text of the ``kind`` error that ``call`` raises."""
    with pytest.raises(kind) as raised:
        call()
    assert type(raised.value) is kind
    return str(raised.value)


# ------------------------------------------------------------ construction


@pytest.mark.parametrize(
    ("max_bytes", "object_nbytes", "expected"),
    [
        ("8", 2, "max_bytes must be an int, not str"),
        (True, 2, "max_bytes must be an int, not bool"),
        (8, 2.0, "object_nbytes must be an int, not float"),
        (8, None, "object_nbytes must be an int, not NoneType"),
    ],
)
def test_a_size_of_the_wrong_type_names_the_argument_and_the_type_given(
    max_bytes: object, object_nbytes: object, expected: str
) -> None:
    make = BlockObjectStore
    assert _message(lambda: make(max_bytes=max_bytes, object_nbytes=object_nbytes), TypeError) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize("object_nbytes", [0, -3])
def test_an_object_size_that_is_not_positive_is_shown_with_its_value(object_nbytes: int) -> None:
    assert _message(lambda: BlockObjectStore(max_bytes=8, object_nbytes=object_nbytes), ValueError) == (
        f"auxiliary output object size must be positive: object_nbytes={object_nbytes}"
    )


def test_a_store_too_small_for_one_object_shows_both_sizes() -> None:
    assert _message(lambda: BlockObjectStore(max_bytes=3, object_nbytes=4), ValueError) == (
        "auxiliary output store must fit at least one object: max_bytes=3 < object_nbytes=4"
    )


class _FailingMmap:
    """``mmap.mmap`` that cannot map anything."""

    def __call__(self, fileno: int, length: int) -> mmap.mmap:
        raise OSError(12, "Cannot allocate memory")


def test_an_arena_that_cannot_be_mapped_shows_the_bytes_the_objects_and_the_os_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(mmap, "mmap", _FailingMmap())
    # Capacity 4 of 2 bytes: one first chunk of 4 slots, 8 bytes, mapped by the first put.
    store = BlockObjectStore(max_bytes=4 * N + 1, object_nbytes=N)
    assert _message(lambda: store.put([BlockObject("a", b"ab")]), MemoryError) == (
        "auxiliary output store cannot map 8 more bytes for 4 objects: [Errno 12] Cannot allocate memory"
    )


# ------------------------------------------------------------- the batch


def test_a_batch_that_is_no_iterable_names_the_type_given() -> None:
    store = BlockObjectStore(max_bytes=4, object_nbytes=N)
    assert _message(lambda: store.put(7), TypeError) == (  # type: ignore[arg-type]
        "objects must be an iterable of objects with key and payload, not int"
    )


def test_an_object_without_key_and_payload_names_its_type() -> None:
    store = BlockObjectStore(max_bytes=4, object_nbytes=N)
    assert _message(lambda: store.put([obj("a"), 3.5]), TypeError) == (  # type: ignore[list-item]
        "object of type float has no key and payload"
    )


class _BrokenRepr:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")


def test_a_key_that_is_not_a_str_is_shown_with_its_repr_and_type_for_each_argument() -> None:
    store = BlockObjectStore(max_bytes=4, object_nbytes=N)
    assert _message(lambda: store.put([BlockObject(5, b"aa")]), TypeError) == (  # type: ignore[arg-type]
        "key must be a str; got 5 of type int"
    )
    assert _message(lambda: store.put([], retain_keys=["a", 6]), TypeError) == (  # type: ignore[list-item]
        "a key of retain_keys must be a str; got 6 of type int"
    )
    assert _message(lambda: store.put([], release_keys=[b"r"]), TypeError) == (  # type: ignore[list-item]
        "a key of release_keys must be a str; got b'r' of type bytes"
    )
    assert _message(lambda: store.get_concatenated([None]), TypeError) == (  # type: ignore[list-item]
        "a key of keys must be a str; got None of type NoneType"
    )
    assert _message(lambda: store.read_into([1.5], bytearray(N)), TypeError) == (  # type: ignore[list-item]
        "a key of keys must be a str; got 1.5 of type float"
    )
    assert len(store) == 0


def test_a_key_whose_repr_fails_or_is_long_is_still_shown_readably() -> None:
    # The message must not fail on the very value it reports, nor grow without bound.
    store = BlockObjectStore(max_bytes=4, object_nbytes=N)
    assert _message(lambda: store.put([BlockObject(_BrokenRepr(), b"aa")]), TypeError) == (  # type: ignore[arg-type]
        "key must be a str; got <_BrokenRepr object with a broken __repr__> of type _BrokenRepr"
    )
    long = b"x" * 100  # repr: b'xxx...x' (103 characters), cut to 80 with "..."
    assert _message(lambda: store.put([BlockObject(long, b"aa")]), TypeError) == (  # type: ignore[arg-type]
        "key must be a str; got b'" + "x" * 75 + "... of type bytes"
    )


class _Unhashable(str):
    def __hash__(self) -> int:
        raise LookupError("no hash today")


def test_a_key_whose_hash_fails_names_the_argument_its_type_and_the_error() -> None:
    store = BlockObjectStore(max_bytes=4, object_nbytes=N)
    assert _message(lambda: store.put([], release_keys=[_Unhashable("r")]), TypeError) == (
        "a key of release_keys of type _Unhashable cannot be hashed: LookupError: LookupError('no hash today')"
    )


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (lambda s: s.put([], retain_keys=3), "retain_keys must be an iterable of str keys, not a int"),
        (lambda s: s.put([], release_keys="ab"), "release_keys must be an iterable of str keys, not a str"),
        (lambda s: s.get_concatenated(b"ab"), "keys must be an iterable of str keys, not a bytes"),
        (lambda s: s.read_into(None, bytearray(N)), "keys must be an iterable of str keys, not a NoneType"),
    ],
    ids=["retain_keys", "release_keys", "get_concatenated", "read_into"],
)
def test_a_key_list_that_is_no_list_names_the_argument_and_the_type(
    call: Callable[[BlockObjectStore], object], expected: str
) -> None:
    assert _message(lambda: call(BlockObjectStore(max_bytes=4, object_nbytes=N)), TypeError) == expected


def test_a_payload_of_the_wrong_length_names_its_key_its_length_and_the_size() -> None:
    store = BlockObjectStore(max_bytes=4 * N, object_nbytes=N)
    assert _message(lambda: store.put([obj("a"), BlockObject("it's", b"abc")]), ValueError) == (
        'payload of "it\'s" is 3 bytes; object_nbytes is 2'
    )


def test_a_payload_that_is_no_buffer_names_its_key_and_type() -> None:
    store = BlockObjectStore(max_bytes=4 * N, object_nbytes=N)
    assert _message(lambda: store.put([BlockObject("k", "ab")]), TypeError) == (  # type: ignore[arg-type]
        "payload of 'k' must be bytes-like, not str"
    )


# ----------------------------------------------------------- put failures


def test_a_capacity_error_names_the_limit_the_keys_that_would_have_to_stay_and_the_batch() -> None:
    # Capacity 3: 'a' and 'b' pinned, 'c' evictable. Two new keys need two
    # victims, one is there: 3 stored + 2 new - 1 evicted = 4 would stay.
    store = BlockObjectStore(max_bytes=3 * N, object_nbytes=N)
    store.put([obj("a"), obj("b"), obj("c")], retain_keys=["a", "b"])
    expected = (
        "auxiliary output store cannot retain the requested batch: limit=3 objects; 4 would have to stay "
        "(too few unpinned, unprotected keys to evict; batch of 2 keys); nothing was changed"
    )
    assert _message(lambda: store.put([obj("d"), obj("e")]), CapacityError) == expected  # the plain put
    assert _message(lambda: store.put([obj("d"), obj("e")], retain_keys=["c"]), CapacityError) == (
        # the put that pins: 'c' is no victim any more, so 5 would stay
        expected.replace("4 would", "5 would")
    )
    assert store.stats().capacity_failures == 2


def test_a_release_of_a_key_with_no_reference_names_the_key_readably() -> None:
    # Also a KeyError, whose own str would show the message quoted like a repr.
    store = BlockObjectStore(max_bytes=4 * N, object_nbytes=N)
    expected = 'release of "it\'s", which holds no reference (released more often than retained)'
    assert _message(lambda: store.put([], release_keys=["it's"]), UnreferencedKeyError) == expected
    with pytest.raises(KeyError) as raised:
        store.put([], retain_keys=["it's"], release_keys=["it's", "it's"])
    assert str(raised.value) == expected
    assert store.snapshot().references == ()


# ------------------------------------------------------------------ reads


def _store_with_a_pinned_key() -> BlockObjectStore:
    """Capacity 3: 'a' unpinned, 'p' pinned (used=2)."""
    store = BlockObjectStore(max_bytes=3 * N + 1, object_nbytes=N)
    store.put([obj("a"), obj("p")], retain_keys=["p"])
    return store


def test_a_missing_key_is_named_with_the_store_fill_and_vllms_advice() -> None:
    missing = (
        "auxiliary output object 'zz' does not exist; the object may have been evicted or never put "
        "(used={used}, limit=3 objects). Increase aux_output_config.max_bytes when a KV cache hit requires it."
    )
    unpinned_only = BlockObjectStore(max_bytes=3 * N, object_nbytes=N)
    unpinned_only.put([obj("a")])
    assert _message(lambda: unpinned_only.get_concatenated(["a", "zz", "yy"]), MissingKeyError) == missing.format(
        used=1
    )
    store = _store_with_a_pinned_key()
    assert _message(lambda: store.get_concatenated(["p", "zz", "yy"]), MissingKeyError) == missing.format(used=2)
    assert _message(lambda: store.read_into(["a", "zz"], bytearray(4 * N)), MissingKeyError) == missing.format(used=2)


@pytest.mark.parametrize(
    ("buffer", "expected"),
    [
        (7, "buffer must be a writable buffer, not int"),
        (b"abcd", "buffer of type bytes is read-only"),
        (memoryview(bytearray(8))[::2], "buffer is not C-contiguous"),
    ],
    ids=["no buffer", "read-only", "strided"],
)
def test_a_buffer_that_cannot_be_written_says_why(buffer: object, expected: str) -> None:
    store = _store_with_a_pinned_key()
    assert _message(lambda: store.read_into(["a"], buffer), TypeError) == expected


def test_a_buffer_too_small_shows_its_size_the_keys_and_the_bytes_needed() -> None:
    store = _store_with_a_pinned_key()
    assert _message(lambda: store.read_into(["a", "p"], bytearray(3)), ValueError) == (
        "buffer of 3 bytes is too small for 2 objects of 2 bytes (4 bytes)"
    )


# ----------------------------------------------------- closed and broken


def _calls(store: Any) -> dict[str, Callable[[], object]]:
    """Every call of either store that fails once it is closed."""
    return {
        "put": lambda: store.put([obj("a")]),
        "get_concatenated": lambda: store.get_concatenated(["a"]),
        "read_into": lambda: store.read_into(["a"], bytearray(N)),
        "__len__": lambda: len(store),
        "__contains__": lambda: "a" in store,
        "stats": store.stats,
        "flush": store.flush,
        "__enter__": store.__enter__,
    }


def test_every_call_on_a_closed_store_says_it_is_closed() -> None:
    store = BlockObjectStore(max_bytes=4, object_nbytes=N)
    store.close()
    for name, call in _calls(store).items():
        assert _message(call, RuntimeError) == CLOSED, name


@pytest.mark.parametrize("interrupted", ["put", "close", "read_into"])
def test_a_broken_store_names_the_interrupted_call_in_its_error_and_its_repr(interrupted: str) -> None:
    store = BlockObjectStore(max_bytes=4 * N, object_nbytes=N)
    store.put([obj("a")], retain_keys=["a", "z"])
    store._gate = interrupted + "!"  # as a change that could not be completed leaves it
    assert repr(store) == (
        "BlockObjectStore(profile='strict', capacity=4, object_nbytes=2, stored=1, pinned=1, referenced=2, "
        f"broken by an interrupted {interrupted}())"
    )
    expected = (
        f"this store is broken: an exception interrupted {interrupted}() while it was changing the store and "
        "the change could not be completed; make a new store"
    )
    for name, call in [*_calls(store).items(), ("close", store.close)]:
        assert _message(call, BrokenStoreError) == expected, name


def test_the_repr_shows_profile_sizes_and_fill_and_then_closed() -> None:
    store = BlockObjectStore(max_bytes=5 * N + 1, object_nbytes=N)
    store.put([obj("a"), obj("b"), obj("c")], retain_keys=["b", "x", "y"])
    assert repr(store) == (
        "BlockObjectStore(profile='strict', capacity=5, object_nbytes=2, stored=3, pinned=1, referenced=3)"
    )
    store.close()
    assert repr(store) == "BlockObjectStore(profile='strict', capacity=5, object_nbytes=2, closed)"


# ------------------------------------------------------------- reentrancy


def _store_refusal(call: str, running: str) -> str:
    return (
        f"{call}() was called while {running}() is running on the same store (from a key, payload, buffer, "
        "iterable or signal handler it uses); a store's calls cannot nest"
    )


def _refusal_of(call: Callable[[], object]) -> str:
    try:
        call()
    except ReentrantCallError as error:
        return str(error)
    return "not refused"


def _key_calling(callback: Callable[[], object], seen: list[str]) -> type[str]:
    """A str subclass whose hash (caller code the store runs) makes a call
    back into the store and records how it was refused."""

    class Key(str):
        def __hash__(self) -> int:
            seen.append(_refusal_of(callback))
            return str.__hash__(self)

    return Key


@needs_own_code_objects
def test_a_reentrant_call_names_itself_for_every_call() -> None:
    store = BlockObjectStore(max_bytes=4 * N, object_nbytes=N)
    store.put([obj("a")])
    calls = {**_calls(store), "close": store.close}
    for name, call in calls.items():
        seen: list[str] = []
        key = _key_calling(call, seen)("a")
        assert store.get_concatenated([key]) == obj("a").payload  # the running read goes on
        assert seen == [_store_refusal(name, "get_concatenated")]
    assert len(store) == 1


@needs_own_code_objects
def test_a_reentrant_call_names_the_call_running() -> None:
    store = BlockObjectStore(max_bytes=4 * N, object_nbytes=N)
    store.put([obj("a")])
    seen: list[str] = []
    key = _key_calling(store.flush, seen)
    store.put([BlockObject(key("b"), b"bb")])
    store.read_into([key("a")], bytearray(N))
    assert key("a") in store
    assert seen == [_store_refusal("flush", running) for running in ("put", "read_into", "__contains__")]


@needs_own_code_objects
def test_a_reentrant_call_during_close_names_close() -> None:
    # Nothing of the caller's runs in close, so a profile hook stands in for a
    # signal handler, calling back as close begins its changes.
    store = BlockObjectStore(max_bytes=4 * N, object_nbytes=N)
    release = BlockObjectStore._release.__code__
    seen: list[str] = []

    def hook(frame: FrameType, event: str, arg: object) -> None:
        if event == "call" and frame.f_code is release and not seen:
            seen.append(_refusal_of(store.stats))

    previous = sys.getprofile()
    sys.setprofile(hook)
    try:
        store.close()
    finally:
        sys.setprofile(previous)
    assert seen == [_store_refusal("stats", "close")]


# ---------------------------------------------------- the background store


class _NoClose:
    def put(self, objects: object) -> None: ...

    def get_concatenated(self, keys: object) -> bytes:
        return b""


class _NoReads:
    def put(self, objects: object) -> None: ...


@pytest.mark.parametrize(
    ("store", "expected"),
    [
        (object(), "store must be a block object store (with put()), not object"),
        (_NoReads(), "store must be a block object store (with get_concatenated()), not _NoReads"),
        (_NoClose(), "store must be a block object store (with close()), not _NoClose"),
    ],
    ids=["object", "no reads", "no close"],
)
def test_a_background_store_of_no_store_names_the_call_missing_and_the_type(store: object, expected: str) -> None:
    assert _message(lambda: BackgroundBlockObjectStore(store, max_pending_batches=1), TypeError) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("bound", "kind", "expected"),
    [
        (1.0, TypeError, "max_pending_batches must be an int, not float"),
        (True, TypeError, "max_pending_batches must be an int, not bool"),
        (0, ValueError, "max_pending_batches must be >= 1, got 0"),
        (-2, ValueError, "max_pending_batches must be >= 1, got -2"),
    ],
)
def test_a_bad_queue_bound_is_named_with_its_type_or_value(
    bound: object, kind: type[BaseException], expected: str
) -> None:
    inner = BlockObjectStore(max_bytes=4, object_nbytes=N)
    assert _message(lambda: BackgroundBlockObjectStore(inner, max_pending_batches=bound), kind) == expected  # type: ignore[arg-type]


def _background() -> BackgroundBlockObjectStore:
    return BackgroundBlockObjectStore(BlockObjectStore(max_bytes=4 * N, object_nbytes=N), max_pending_batches=2)


def test_every_call_on_a_closed_background_store_says_it_is_closed() -> None:
    store = _background()
    store.close()
    for name, call in _calls(store).items():
        assert _message(call, RuntimeError) == CLOSED, name


class _Refusing(BlockObjectStore):
    """An inner store whose put of 'bad' fails."""

    def put(self, objects: Any, **pins: Any) -> None:
        objects = list(objects)
        if any(o.key == "bad" for o in objects):
            raise LookupError("inner store refuses 'bad'")
        super().put(objects, **pins)


@pytest.mark.timeout(60)
def test_a_failed_background_write_is_reported_with_its_type_and_text_by_every_later_call() -> None:
    store = BackgroundBlockObjectStore(_Refusing(max_bytes=4 * N, object_nbytes=N), max_pending_batches=2)
    store.put([obj("bad")])
    expected = "a background write failed, so this store stays failed: LookupError: inner store refuses 'bad'"
    assert _message(store.flush, BlockObjectStoreError) == expected  # waits for the write: then it is latched
    for name, call in [*_calls(store).items(), ("close", store.close)]:
        if name != "__enter__":  # entering checks only that the store is open
            assert _message(call, BlockObjectStoreError) == expected, name


class _ToldApart(_Refusing):
    """An inner store whose str is not its repr: the background store's repr must show the repr."""

    def __str__(self) -> str:
        return "an inner store"


@pytest.mark.timeout(60)
def test_a_background_repr_shows_the_bound_the_state_and_the_inner_stores_repr() -> None:
    inner = _ToldApart(max_bytes=4 * N, object_nbytes=N)
    store = BackgroundBlockObjectStore(inner, max_pending_batches=3)
    shown = f"store={inner!r})"
    assert shown.startswith("store=BlockObjectStore(profile='strict', capacity=4")
    assert repr(store) == f"BackgroundBlockObjectStore(max_pending_batches=3, open, {shown}"
    store.put([obj("bad")])
    with pytest.raises(BlockObjectStoreError):
        store.flush()
    assert repr(store) == f"BackgroundBlockObjectStore(max_pending_batches=3, failed, {shown}"
    with pytest.raises(BlockObjectStoreError):
        store.close()
    assert repr(store) == f"BackgroundBlockObjectStore(max_pending_batches=3, closed, store={inner!r})"


def _dead_writer(shared: object) -> None:
    """A writer body that ends at once, leaving no word (as a writer killed
    before it latched anything would)."""


def _with_a_dead_writer(monkeypatch: pytest.MonkeyPatch) -> BackgroundBlockObjectStore:
    """A store whose writer has ended, with one batch queued that it never applies."""
    monkeypatch.setattr(background, "_write", _dead_writer)
    store = BackgroundBlockObjectStore(BlockObjectStore(max_bytes=4 * N, object_nbytes=N), max_pending_batches=1)
    store._thread.join(10)
    assert not store._thread.is_alive()
    store.put([obj("a")])  # room for one: queued without waiting
    return store


@pytest.mark.timeout(60)
def test_a_writer_that_died_while_the_owner_waits_is_reported_as_ended_unexpectedly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = _with_a_dead_writer(monkeypatch)
    expected = (
        "a background write failed, so this store stays failed: WriterDiedError: "
        "the background writer thread ended unexpectedly"
    )
    assert _message(store.flush, BlockObjectStoreError) == expected
    assert _message(store.close, BlockObjectStoreError) == expected


@pytest.mark.timeout(60)
def test_a_writer_that_left_batches_is_reported_by_close_and_by_the_finalizer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    left = "the background writer thread ended with batches not applied"
    store = _with_a_dead_writer(monkeypatch)
    assert _message(store.close, BlockObjectStoreError) == (
        f"a background write failed, so this store stays failed: WriterDiedError: {left}"
    )
    dropped = _with_a_dead_writer(monkeypatch)
    shared = dropped._s
    del dropped  # the finalizer runs here and latches what the writer left
    assert type(shared.error) is WriterDiedError and str(shared.error) == left


def _background_refusal(call: str, running: str) -> str:
    return (
        f"{call}() was called while {running}() is running on the same background store "
        "(from a key, payload, iterable or signal handler it uses); its calls cannot nest"
    )


@needs_own_code_objects
@pytest.mark.timeout(60)
def test_a_reentrant_background_call_names_itself_for_every_call() -> None:
    store = _background()
    store.put([obj("a")])
    calls = {**_calls(store), "close": store.close}
    del calls["__enter__"]  # no owner call: it only checks that the store is open
    for name, call in calls.items():
        seen: list[str] = []

        def keys(call: Callable[[], object] = call, seen: list[str] = seen) -> Iterator[str]:
            seen.append(_refusal_of(call))
            yield "a"

        assert store.get_concatenated(keys()) == obj("a").payload
        assert seen == [_background_refusal(name, "get_concatenated")]
    store.close()


class _CallingBack(BlockObjectStore):
    """An inner store whose stats, len and close call back into the background store."""

    def __init__(self) -> None:
        super().__init__(max_bytes=4 * N, object_nbytes=N)
        self.seen: list[str] = []
        self.callback: Callable[[], object] = lambda: None

    def stats(self) -> Any:
        self.seen.append(_refusal_of(self.callback))
        return super().stats()

    def __len__(self) -> int:
        self.seen.append(_refusal_of(self.callback))
        return super().__len__()

    def close(self) -> None:
        self.seen.append(_refusal_of(self.callback))
        super().close()


@needs_own_code_objects
@pytest.mark.timeout(60)
def test_a_reentrant_background_call_names_the_call_running() -> None:
    inner = _CallingBack()
    store = BackgroundBlockObjectStore(inner, max_pending_batches=2)
    inner.callback = store.flush
    seen = inner.seen

    def retains() -> Iterator[str]:
        seen.append(_refusal_of(store.flush))
        yield "a"

    def keys() -> Iterator[str]:
        seen.append(_refusal_of(store.flush))
        yield "a"

    store.put([obj("a")], retain_keys=retains())
    store.read_into(keys(), bytearray(N))
    assert _key_calling(store.flush, seen)("a") in store
    store.stats()
    assert len(store) == 1
    store.close()
    running = ["put", "read_into", "__contains__", "stats", "__len__", "close"]
    assert seen == [_background_refusal("flush", name) for name in running]
