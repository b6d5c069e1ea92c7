"""Every class of bad input to BlockObjectStore: the exact error class, the
same error kind as the spec's ReferenceStore, and a store left exactly as it
was (snapshot before == after, bookkeeping intact)."""

from __future__ import annotations

import array
from collections.abc import Callable
from typing import Any

import pytest

from auxspec.engine.observable import canonical
from auxspec.models.sequential import Kind
from auxspec.reference import binding
from auxspec.reference.store import ReferenceStore
from auxstore import BlockObject, BlockObjectStore, BlockObjectStoreError

NBYTES = 4


def _fill(store: Any) -> None:
    # a, b, c stored (a pinned, least recent first); p pinned but not stored.
    store.put(
        [BlockObject("a", b"AAAA"), BlockObject("b", b"BBBB"), BlockObject("c", b"CCCC")],
        retain_keys=["a", "p", "p"],
    )


def _stores() -> tuple[BlockObjectStore, ReferenceStore]:
    store = BlockObjectStore(max_bytes=4 * NBYTES, object_nbytes=NBYTES)
    reference = ReferenceStore(max_bytes=4 * NBYTES, object_nbytes=NBYTES)
    _fill(store)
    _fill(reference)
    return store, reference


class _NoPayload:
    key = "n"


class _NoKey:
    payload = b"NNNN"


def obj(key: object, payload: object) -> BlockObject:
    return BlockObject(key, payload)  # type: ignore[arg-type]


# (op, call, kind): the call takes the store; op names it for binding.classify.
Case = tuple[str, Callable[[Any], object], Kind]

CASES: dict[str, Case] = {
    # payload of the wrong length
    "payload short": ("put", lambda s: s.put([obj("d", b"DDD")]), Kind.PAYLOAD),
    "payload long": ("put", lambda s: s.put([obj("d", b"DDDDD")]), Kind.PAYLOAD),
    "payload empty": ("put", lambda s: s.put([obj("d", b"")]), Kind.PAYLOAD),
    "payload short bytearray": ("put", lambda s: s.put([obj("d", bytearray(3))]), Kind.PAYLOAD),
    "payload of stored key, short": ("put", lambda s: s.put([obj("b", b"B")]), Kind.PAYLOAD),
    "payload wrong after a valid new object": (
        "put",
        lambda s: s.put([obj("d", b"DDDD"), obj("e", b"E")]),
        Kind.PAYLOAD,
    ),
    # payload of the wrong type
    "payload str": ("put", lambda s: s.put([obj("d", "DDDD")]), Kind.TYPE),
    "payload int": ("put", lambda s: s.put([obj("d", 4)]), Kind.TYPE),
    "payload None": ("put", lambda s: s.put([obj("d", None)]), Kind.TYPE),
    "payload list": ("put", lambda s: s.put([obj("d", [1, 2, 3, 4])]), Kind.TYPE),
    # keys that are not str
    "batch key int": ("put", lambda s: s.put([obj(1, b"DDDD")]), Kind.TYPE),
    "batch key True": ("put", lambda s: s.put([obj(True, b"DDDD")]), Kind.TYPE),
    "batch key bytes": ("put", lambda s: s.put([obj(b"d", b"DDDD")]), Kind.TYPE),
    "batch key None after valid": ("put", lambda s: s.put([obj("d", b"DDDD"), obj(None, b"EEEE")]), Kind.TYPE),
    "retain key int": ("put", lambda s: s.put([obj("d", b"DDDD")], retain_keys=["b", 1]), Kind.TYPE),
    "release key None": ("put", lambda s: s.put([], release_keys=["a", None]), Kind.TYPE),
    "get key int": ("get", lambda s: s.get_concatenated(["a", 1]), Kind.TYPE),
    "get key bytes": ("get", lambda s: s.get_concatenated([b"a"]), Kind.TYPE),
    "read_into key None": ("read_into", lambda s: s.read_into(["a", None], bytearray(8)), Kind.TYPE),
    # key lists and batches of the wrong shape
    "retain_keys str": ("put", lambda s: s.put([], retain_keys="b"), Kind.TYPE),
    "release_keys str": ("put", lambda s: s.put([], release_keys="a"), Kind.TYPE),
    "release_keys bytes": ("put", lambda s: s.put([], release_keys=b"a"), Kind.TYPE),
    "retain_keys int": ("put", lambda s: s.put([], retain_keys=3), Kind.TYPE),
    "get keys str": ("get", lambda s: s.get_concatenated("a"), Kind.TYPE),
    "get keys tuple of str": ("get", lambda s: s.get_concatenated(("a", 2)), Kind.TYPE),
    "get keys None": ("get", lambda s: s.get_concatenated(None), Kind.TYPE),
    "read_into keys str": ("read_into", lambda s: s.read_into("a", bytearray(8)), Kind.TYPE),
    "batch str": ("put", lambda s: s.put("ab"), Kind.TYPE),
    "batch bytes": ("put", lambda s: s.put(b"ab"), Kind.TYPE),
    "batch None": ("put", lambda s: s.put(None), Kind.TYPE),
    "batch of a bare tuple": ("put", lambda s: s.put([("d", b"DDDD")]), Kind.TYPE),
    # objects without key or payload
    "object without payload": ("put", lambda s: s.put([_NoPayload()]), Kind.TYPE),
    "object without key": ("put", lambda s: s.put([obj("d", b"DDDD"), _NoKey()]), Kind.TYPE),
    # over-release
    "release unreferenced stored key": ("put", lambda s: s.put([], release_keys=["b"]), Kind.UNREFERENCED),
    "release never seen key": ("put", lambda s: s.put([obj("d", b"DDDD")], release_keys=["zz"]), Kind.UNREFERENCED),
    "release twice after reaching zero": (
        "put",
        lambda s: s.put([obj("d", b"DDDD")], release_keys=["a", "a"]),
        Kind.UNREFERENCED,
    ),
    "release after zero, later key valid": (
        "put",
        lambda s: s.put([], retain_keys=["b"], release_keys=["p", "b", "b", "p"]),
        Kind.UNREFERENCED,
    ),
    "retain then release three times": (
        "put",
        lambda s: s.put([], retain_keys=["q"], release_keys=["q", "q"]),
        Kind.UNREFERENCED,
    ),
    # no room: everything stored is pinned or protected
    "capacity with pins": (
        "put",
        lambda s: s.put([obj("d", b"DDDD"), obj("e", b"EEEE")], retain_keys=["b", "c"]),
        Kind.CAPACITY,
    ),
    "capacity batch bigger than store": (
        "put",
        lambda s: s.put([obj(k, b"XXXX") for k in "defgh"], release_keys=["p"]),
        Kind.CAPACITY,
    ),
    # reads of keys that are not stored
    "get missing": ("get", lambda s: s.get_concatenated(["a", "zz"]), Kind.MISSING),
    "get pinned but not stored": ("get", lambda s: s.get_concatenated(["p"]), Kind.MISSING),
    "read_into missing": ("read_into", lambda s: s.read_into(["b", "zz"], bytearray(8)), Kind.MISSING),
    # read_into buffers
    "buffer short": ("read_into", lambda s: s.read_into(["a", "b"], bytearray(7)), Kind.BUFFER),
    "buffer empty": ("read_into", lambda s: s.read_into(["a"], bytearray()), Kind.BUFFER),
    "buffer short array": ("read_into", lambda s: s.read_into(["a", "b"], array.array("H", bytes(6))), Kind.BUFFER),
    "buffer readonly bytes": ("read_into", lambda s: s.read_into(["a"], bytes(8)), Kind.TYPE),
    "buffer readonly memoryview": (
        "read_into",
        lambda s: s.read_into(["a"], memoryview(bytearray(8)).toreadonly()),
        Kind.TYPE,
    ),
    "buffer strided": ("read_into", lambda s: s.read_into(["a"], memoryview(bytearray(16))[::2]), Kind.TYPE),
    "buffer not a buffer": ("read_into", lambda s: s.read_into(["a"], "xxxxxxxx"), Kind.TYPE),
    # the order the model gives when several inputs are bad
    "short payload before bad key": ("put", lambda s: s.put([obj("d", b"D"), obj(1, b"EEEE")]), Kind.PAYLOAD),
    "bad key before short payload": ("put", lambda s: s.put([obj(1, b"D"), obj("d", b"D")]), Kind.TYPE),
    "bad payload type before length": ("put", lambda s: s.put([obj("d", None), obj("e", b"E")]), Kind.TYPE),
    "payload before retain type": ("put", lambda s: s.put([obj("d", b"D")], retain_keys=[1]), Kind.PAYLOAD),
    "type before over-release": ("put", lambda s: s.put([], retain_keys=[1], release_keys=["b"]), Kind.TYPE),
    "over-release before capacity": (
        "put",
        lambda s: s.put([obj(k, b"XXXX") for k in "defgh"], release_keys=["b"]),
        Kind.UNREFERENCED,
    ),
    "bad key before missing": ("get", lambda s: s.get_concatenated(["zz", 1]), Kind.TYPE),
    "missing before short buffer": ("read_into", lambda s: s.read_into(["zz"], bytearray(0)), Kind.MISSING),
    "read-only buffer before missing": ("read_into", lambda s: s.read_into(["zz"], b""), Kind.TYPE),
}


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_is_typed_and_changes_nothing(name: str) -> None:
    op, call, kind = CASES[name]
    store, reference = _stores()
    before = store.snapshot()
    assert before == canonical(reference.snapshot())
    stats_before = store.stats()

    expected = type(binding.exception_for(kind, "strict", ""))
    with pytest.raises(expected) as caught:
        call(store)
    assert type(caught.value) is expected, f"{type(caught.value).__name__} is not exactly {expected.__name__}"
    assert binding.classify(op, caught.value) is kind
    assert str(caught.value), "the message must say what went wrong"

    # The spec agrees on the kind and on the state.
    with pytest.raises(Exception) as spec_caught:
        call(reference)
    assert binding.classify(op, spec_caught.value) is kind

    assert store.snapshot() == before == canonical(reference.snapshot())
    store.check_invariants()
    after = store.stats()
    # Only the error counters may move: misses for a missing key, capacity failures.
    assert (after.stored, after.pinned, after.hits, after.evictions) == (
        stats_before.stored,
        stats_before.pinned,
        stats_before.hits,
        stats_before.evictions,
    )
    assert after.misses == stats_before.misses + (kind is Kind.MISSING)
    assert after.capacity_failures == stats_before.capacity_failures + (kind is Kind.CAPACITY)

    # And the store still works: the error poisoned nothing.
    assert store.get_concatenated(["b", "a"]) == b"BBBBAAAA"
    store.put([BlockObject("d", b"DDDD")])
    assert "d" in store


def test_unreferenced_is_also_a_key_error() -> None:
    store, _ = _stores()
    with pytest.raises(KeyError):
        store.put([], release_keys=["b"])
    with pytest.raises(BlockObjectStoreError, match="'b'"):
        store.put([], release_keys=["b"])


def test_messages_name_the_key_and_sizes() -> None:
    store, _ = _stores()
    with pytest.raises(ValueError, match=r"'d'.*3 bytes.*4"):
        store.put([obj("d", b"DDD")])
    with pytest.raises(BlockObjectStoreError, match="'zz'"):
        store.get_concatenated(["zz"])
    with pytest.raises(ValueError, match=r"7 bytes.*8 bytes"):
        store.read_into(["a", "b"], bytearray(7))
    with pytest.raises(TypeError, match="retain_keys"):
        store.put([], retain_keys="ab")


CLOSED_CALLS: dict[str, Callable[[BlockObjectStore], object]] = {
    "put": lambda s: s.put([BlockObject("d", b"DDDD")]),
    "empty put": lambda s: s.put([]),
    "bad put": lambda s: s.put([obj(1, None)]),
    "get": lambda s: s.get_concatenated(["a"]),
    "empty get": lambda s: s.get_concatenated([]),
    "read_into": lambda s: s.read_into(["a"], bytearray(4)),
    "flush": lambda s: s.flush(),
    "len": len,
    "contains": lambda s: "a" in s,
    "stats": lambda s: s.stats(),
    "enter": lambda s: s.__enter__(),
}


@pytest.mark.parametrize("name", list(CLOSED_CALLS))
def test_calls_after_close_raise_runtime_error(name: str) -> None:
    store, _ = _stores()
    store.close()
    closed = store.snapshot()
    assert closed == ((), (), True)
    with pytest.raises(RuntimeError) as caught:
        CLOSED_CALLS[name](store)
    assert type(caught.value) is RuntimeError  # not a BlockObjectStoreError
    assert binding.classify("get", caught.value) is Kind.CLOSED
    assert store.snapshot() == closed
    store.check_invariants()
    store.close()  # idempotent
    assert store.snapshot() == closed


BAD_SIZES: list[tuple[object, object, type[Exception]]] = [
    (True, 4, TypeError),
    (16, True, TypeError),
    (16, False, TypeError),
    (16.0, 4, TypeError),
    (16, 4.0, TypeError),
    ("16", 4, TypeError),
    (None, 4, TypeError),
    (None, 0, TypeError),  # a type error wins over a range error
    (16, 0, ValueError),
    (16, -4, ValueError),
    (3, 4, ValueError),
    (0, 1, ValueError),
    (-1, 1, ValueError),
]


@pytest.mark.parametrize(("max_bytes", "object_nbytes", "error"), BAD_SIZES)
def test_bad_constructor_arguments(max_bytes: object, object_nbytes: object, error: type[Exception]) -> None:
    with pytest.raises(error) as caught:
        BlockObjectStore(max_bytes=max_bytes, object_nbytes=object_nbytes)  # type: ignore[arg-type]
    assert type(caught.value) is error
    with pytest.raises(error) as spec_caught:
        ReferenceStore(max_bytes=max_bytes, object_nbytes=object_nbytes)  # type: ignore[arg-type]
    assert binding.classify("new", caught.value) is binding.classify("new", spec_caught.value)
