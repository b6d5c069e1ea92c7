"""Checks written for mutants that the suite or ``auxspec verify`` let
through (docs/mutation.md names each mutant). Each test states the rule the
mutant broke; none depends on how the store is laid out inside."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import ClassVar

import pytest

from auxstore import BackgroundBlockObjectStore, BlockObject, BlockObjectStore, BlockObjectStoreError, CapacityError


class _Key(str):
    """A key of a str subclass: the store reads it by value, running its
    ``__hash__`` (caller code) while it does."""


def test_a_str_subclass_key_in_the_store_leaves_it_usable() -> None:
    # ``in`` with a str subclass guards the store while the key's hash runs;
    # the guard must be lifted after, or every later call is refused as
    # reentrant. (A misspelt guard name survives this, rightly: the next call
    # clears a stale guard, and reentry is found from the stack.)
    store = BlockObjectStore(max_bytes=8, object_nbytes=2)
    store.put([BlockObject("a", b"aa")])
    assert _Key("a") in store
    assert _Key("b") not in store
    store.put([BlockObject("b", b"bb")])
    assert store.get_concatenated(["a", "b"]) == b"aabb"
    assert len(store) == 2


class _Index(int):
    """An int subclass: a size is taken by its plain int value."""


def test_int_subclass_sizes_build_a_store_of_their_value() -> None:
    store = BlockObjectStore(max_bytes=_Index(6), object_nbytes=_Index(2))
    store.put([BlockObject(k, k.encode() * 2) for k in "abc"])
    assert store.stats().capacity == 3
    assert store.get_concatenated(["c"]) == b"cc"


class _GatedStore(BlockObjectStore):
    """Its puts wait for ``gate``, so the writer holds a batch as long as the test wants."""

    def __init__(self, max_bytes: int, object_nbytes: int) -> None:
        super().__init__(max_bytes=max_bytes, object_nbytes=object_nbytes)
        self.gate = threading.Event()
        self.entered = threading.Event()

    def put(self, objects: object, *, retain_keys: object = (), release_keys: object = ()) -> None:
        self.entered.set()
        self.gate.wait()
        super().put(objects, retain_keys=retain_keys, release_keys=release_keys)  # type: ignore[arg-type]


@pytest.mark.timeout(60)
def test_a_full_queue_makes_put_wait_instead_of_growing() -> None:
    # max_pending_batches bounds what is queued: with the writer held on one
    # batch and the queue full, the next put waits (mutant: it appended
    # anyway when no write had failed, so the queue grew past its bound).
    inner = _GatedStore(max_bytes=16, object_nbytes=2)
    store = BackgroundBlockObjectStore(inner, max_pending_batches=1)
    store.put([BlockObject("a", b"aa")])
    assert inner.entered.wait(30)  # the writer holds "a"
    store.put([BlockObject("b", b"bb")])  # fills the queue
    third = threading.Thread(target=store.put, args=([BlockObject("c", b"cc")],))
    third.start()
    queue = store._s.queue
    # Either the third put waits (the owner flags that it waits) or it queued past the bound.
    while third.is_alive() and not store._s.owner_waits and len(queue) <= 1:
        third.join(0.01)
    assert len(queue) <= 1, f"{len(queue)} batches queued with max_pending_batches=1"
    assert third.is_alive()  # it waits for room
    inner.gate.set()
    third.join(30)
    store.flush()
    assert store.get_concatenated(["a", "b", "c"]) == b"aabbcc"
    store.close()


def test_a_background_put_takes_one_shot_iterables() -> None:
    # Objects and keys may come as generators, read once. Mutants: a
    # non-list batch replaced by list(None); the release keys passed on as
    # given after being read (an exhausted generator releases nothing).
    store = BackgroundBlockObjectStore(BlockObjectStore(max_bytes=4, object_nbytes=2), max_pending_batches=2)
    store.put((BlockObject(k, k.encode() * 2) for k in "ab"), retain_keys=(k for k in "a"))
    store.put([], release_keys=(k for k in "a"))
    store.put([BlockObject("c", b"cc")])  # full: a, released, moved to the recent end; b is evicted
    store.flush()
    assert "b" not in store
    assert store.get_concatenated(["a", "c"]) == b"aacc"
    assert store.stats().pinned == 0
    store.close()


def test_an_all_empty_put_of_one_shot_iterables_does_nothing_even_after_close() -> None:
    # "An all-empty put does nothing, even after close": also when the empty
    # batch comes as a generator. Mutants: a generator kept as given (or not
    # read at all) is not seen to be empty, so the closed store refuses it.
    store = BackgroundBlockObjectStore(BlockObjectStore(max_bytes=4, object_nbytes=2), max_pending_batches=1)
    store.close()
    store.put(iter(()))
    store.put((o for o in ()), retain_keys=iter(()), release_keys=(k for k in ()))
    with pytest.raises(RuntimeError):
        store.put(iter([BlockObject("a", b"aa")]))


def test_a_background_put_names_the_key_list_it_cannot_read() -> None:
    # The TypeError names the argument and the type given. Mutant: an
    # unreadable release_keys reached the validator as None ("not a NoneType").
    store = BackgroundBlockObjectStore(BlockObjectStore(max_bytes=4, object_nbytes=2), max_pending_batches=1)
    with pytest.raises(TypeError, match=r"^release_keys must be an iterable of str keys, not a int$"):
        store.put([BlockObject("a", b"aa")], release_keys=5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^retain_keys must be an iterable of str keys, not a int$"):
        store.put([BlockObject("a", b"aa")], retain_keys=5)  # type: ignore[arg-type]
    store.put([BlockObject("a", b"aa")])
    assert store.get_concatenated(["a"]) == b"aa"  # nothing was queued by the refused puts
    store.close()


@pytest.mark.parametrize("objects", ["", "ab", b"", 5], ids=["empty str", "str", "empty bytes", "int"])
def test_a_batch_that_is_a_string_or_no_iterable_is_refused_up_front(objects: object) -> None:
    # A str or bytes is iterable but is not a batch: refused before it is
    # read, naming the type. Mutant (`and` for `or` in the up-front check):
    # an empty string was taken as an empty batch, and the others failed
    # later with another message.
    pattern = rf"^objects must be an iterable of objects with key and payload, not {type(objects).__name__}$"
    sequential = BlockObjectStore(max_bytes=4, object_nbytes=2)
    background = BackgroundBlockObjectStore(BlockObjectStore(max_bytes=4, object_nbytes=2), max_pending_batches=1)
    for store in (sequential, background):
        with pytest.raises(TypeError, match=pattern):
            store.put(objects)  # type: ignore[arg-type]
        store.close()


class _NameGetter:
    def __get__(self, owner: object, cls: object = None) -> object:
        return 42  # a name that is not a str


class _TypeWithOddName:
    """Stands in for ``type`` in auxstore._batch: its ``__name__`` getter
    gives a non-str, which type's own never does."""

    __dict__ = {"__name__": _NameGetter()}  # a fake type's namespace

    def __call__(self, value: object) -> type:
        return type(value)


def test_a_type_whose_name_is_not_a_str_is_unnamed(monkeypatch: pytest.MonkeyPatch) -> None:
    # Messages name a value's type by a str only. Mutant: the stand-in text
    # of this branch changed. (Reached only with ``type`` replaced, as the
    # C getter always gives a str.)
    from auxstore import _batch

    monkeypatch.setattr(_batch, "type", _TypeWithOddName(), raising=False)
    assert _batch.type_name(3) == "<unnamed type>"


def test_a_read_of_many_scattered_keys_returns_their_payloads_in_order() -> None:
    # A read of more than 33 keys that are not one run samples its neighbour
    # pairs to pick a copy strategy (only speed depends on the choice).
    # Mutant: the sample's step became a float, so such a read raised.
    keys = [f"k{i:02}" for i in range(48)]
    payloads = {k: k.encode() * 2 for k in keys}  # 6 bytes each
    store = BlockObjectStore(max_bytes=6 * 64, object_nbytes=6)
    for key in keys:  # one put each: slots in key order
        store.put([BlockObject(key, payloads[key])])
    for order in (keys[::-1], keys[::2] + keys[1::2], keys[5:] + keys[:5]):
        assert store.get_concatenated(order) == b"".join(payloads[k] for k in order)
        buffer = bytearray(6 * len(order))
        store.read_into(order, buffer)
        assert bytes(buffer) == b"".join(payloads[k] for k in order)
    store.close()


def test_read_into_copies_runs_of_large_objects_each_to_its_place() -> None:
    # Large objects stored together are copied one run at a time, each to
    # its offset in the buffer. Mutants: the offsets not computed (raised)
    # or the runs not copied (the buffer left as it was).
    size = 8192
    keys = "abcdef"
    payloads = {k: bytes([ord(k)]) * size for k in keys}
    store = BlockObjectStore(max_bytes=size * 8, object_nbytes=size)
    store.put([BlockObject(k, payloads[k]) for k in "abc"])  # one put: consecutive slots
    store.put([BlockObject(k, payloads[k]) for k in "def"])
    for order in ("abc", "bc", "abcdef", "defab", "efbc"):
        buffer = bytearray(b"\0" * (size * len(order) + 3))
        assert store.read_into(list(order), buffer) == size * len(order)
        assert bytes(buffer) == b"".join(payloads[k] for k in order) + b"\0\0\0"
    store.close()


class _CallsWhenHashed(str):
    """A key whose hash (caller code the store runs) makes ``call``, a call
    back into the store under test."""

    call: ClassVar[Callable[[], object]]  # read through the class: a plain function, not a method

    def __hash__(self) -> int:
        type(self).call()
        return str.__hash__(self)

    def __eq__(self, other: object) -> bool:
        return str.__eq__(self, other)


class _PutsWhenHashed(_CallsWhenHashed):
    pass


class _ClosesWhenHashed(_CallsWhenHashed):
    pass


def test_a_refused_reentrant_call_names_itself_and_the_call_running() -> None:
    # Mutant: the reentrant put named itself "XXputXX" in the message.
    store = BlockObjectStore(max_bytes=8, object_nbytes=2)
    _PutsWhenHashed.call = lambda: store.put([BlockObject("z", b"zz")])
    store.put([BlockObject("a", b"aa")])
    for call, running in [
        (lambda: store.put([BlockObject(_PutsWhenHashed("b"), b"bb")]), "put"),
        (lambda: store.get_concatenated([_PutsWhenHashed("a")]), "get_concatenated"),
    ]:
        with pytest.raises(TypeError) as raised:
            call()
        assert str(raised.value.__cause__).startswith(
            f"put() was called while {running}() is running on the same store"
        )
    assert store.get_concatenated(["a"]) == b"aa" and "z" not in store and len(store) == 1
    store.close()


def test_size_and_capacity_messages_name_their_argument_and_count() -> None:
    # Mutants: the size's argument name passed as None ("None must be an
    # int"), and the count of keys that would have to stay not computed.
    with pytest.raises(TypeError, match=r"^max_bytes must be an int, not str$"):
        BlockObjectStore(max_bytes="8", object_nbytes=2)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^object_nbytes must be an int, not float$"):
        BlockObjectStore(max_bytes=8, object_nbytes=2.0)  # type: ignore[arg-type]
    store = BlockObjectStore(max_bytes=4, object_nbytes=2)
    store.put([BlockObject("a", b"aa"), BlockObject("b", b"bb")], retain_keys=["a", "b"])
    with pytest.raises(CapacityError, match=r"limit=2 objects; 3 would have to stay \(too few unpinned"):
        store.put([BlockObject("c", b"cc")])
    store.close()


def test_a_refused_reentrant_close_names_itself() -> None:
    # Mutant: close passed None as its own name to the refusal.
    store = BlockObjectStore(max_bytes=8, object_nbytes=2)
    _ClosesWhenHashed.call = store.close
    store.put([BlockObject("a", b"aa")])
    with pytest.raises(TypeError) as raised:
        store.get_concatenated([_ClosesWhenHashed("a")])
    assert str(raised.value.__cause__).startswith("close() was called while get_concatenated() is running")
    assert store.get_concatenated(["a"]) == b"aa"  # not closed
    store.close()


def test_a_payload_that_is_no_buffer_is_named_with_its_key_and_type() -> None:
    # Mutant: the TypeError lost its text (TypeError(None)).
    store = BlockObjectStore(max_bytes=4, object_nbytes=2)
    with pytest.raises(TypeError, match=r"^payload of 'a' must be bytes-like, not int$"):
        store.put([BlockObject("a", 5)])  # type: ignore[arg-type]
    assert len(store) == 0
    store.close()


class _UnhashableKey(str):
    """A str subclass key whose ``__hash__`` raises."""

    def __hash__(self) -> int:
        raise ValueError("no hash")


def test_a_key_whose_hash_raises_is_named_with_its_type_and_the_error() -> None:
    # The TypeError names the key's type and the error its hash raised.
    # Mutants (seed 5): either type shown as NoneType.
    store = BlockObjectStore(max_bytes=4, object_nbytes=2)
    background = BackgroundBlockObjectStore(BlockObjectStore(max_bytes=4, object_nbytes=2), max_pending_batches=1)
    tail = "of type _UnhashableKey cannot be hashed: ValueError: ValueError('no hash')"
    for target in (store, background):
        with pytest.raises(TypeError) as raised:
            target.put([BlockObject(_UnhashableKey("a"), b"aa")])
        assert str(raised.value) == f"key {tail}"
    with pytest.raises(TypeError) as raised:
        store.put([], retain_keys=[_UnhashableKey("a")])
    assert str(raised.value) == f"a key of retain_keys {tail}"
    with pytest.raises(TypeError) as raised:
        store.get_concatenated([_UnhashableKey("a")])
    assert str(raised.value) == f"a key of keys {tail}"
    assert len(store) == 0 and background.get_concatenated([]) == b""
    store.close()
    background.close()


def test_a_background_store_names_its_state_in_its_repr() -> None:
    # Open, failed (a batch the inner store refused is latched), closed.
    # Mutant (seed 5): "FAILED" for "failed".
    inner = BlockObjectStore(max_bytes=2, object_nbytes=2)
    store = BackgroundBlockObjectStore(inner, max_pending_batches=1)
    assert repr(store) == f"BackgroundBlockObjectStore(max_pending_batches=1, open, store={inner!r})"
    store.put([BlockObject("a", b"aa"), BlockObject("b", b"bb")])  # two objects, room for one
    with pytest.raises(BlockObjectStoreError, match="a background write failed"):
        store.flush()
    assert repr(store) == f"BackgroundBlockObjectStore(max_pending_batches=1, failed, store={inner!r})"
    with pytest.raises(BlockObjectStoreError, match="a background write failed"):
        store.close()
    assert repr(store) == f"BackgroundBlockObjectStore(max_pending_batches=1, closed, store={inner!r})"
