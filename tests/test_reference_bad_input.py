"""Under ``strict``, every bad input to ``ReferenceStore`` fails typed, readably,
and before any change.

Each case names the exception class it must raise and words its message must
contain, and the store's whole model state is compared before and after.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from auxspec import ReferenceStore
from auxstore import BlockObject, BlockObjectStoreError, UnreferencedKeyError


@dataclass(frozen=True)
class Bad:
    """An object shaped like a BlockObject, but with any key and payload."""

    key: object
    payload: object


def populated() -> ReferenceStore:
    """A strict store with stored keys, a pinned key and a key referenced but not stored."""
    store = ReferenceStore(max_bytes=8, object_nbytes=2)  # capacity 4
    store.put([BlockObject("a", b"aa"), BlockObject("b", b"bb"), BlockObject("c", b"cc")], retain_keys=["a", "x", "x"])
    assert store.state.entries == (("a", b"aa"), ("b", b"bb"), ("c", b"cc"))
    assert store.state.refs == (("a", 1), ("x", 2))
    return store


# The store is Any so the cases can pass ill-typed arguments without casts.
Call = Callable[[Any], object]


@dataclass(frozen=True)
class Case:
    name: str
    call: Call
    error: type[BaseException]
    words: tuple[str, ...]  # each must appear in the message (case-insensitive)


def _cases() -> list[Case]:
    ok = BlockObject("d", b"dd")
    cases = [
        # payload of the wrong length, alone or after a good object
        Case("payload too long", lambda s: s.put([BlockObject("d", b"ddd")]), ValueError, ("payload", "object_nbytes")),
        Case("payload too short", lambda s: s.put([BlockObject("d", b"d")]), ValueError, ("payload", "object_nbytes")),
        Case("payload empty", lambda s: s.put([BlockObject("d", b"")]), ValueError, ("payload",)),
        Case("bad payload after good", lambda s: s.put([ok, BlockObject("e", b"e")]), ValueError, ("payload",)),
        Case(
            "bad payload with pins",
            lambda s: s.put([BlockObject("e", b"e")], retain_keys=["b"], release_keys=["a"]),
            ValueError,
            ("payload",),
        ),
        # payload of the wrong type
        Case("payload str", lambda s: s.put([BlockObject("d", "dd")]), TypeError, ("payload",)),  # type: ignore[arg-type]
        Case("payload int", lambda s: s.put([Bad("d", 12)]), TypeError, ("payload",)),
        Case("payload None", lambda s: s.put([Bad("d", None)]), TypeError, ("payload",)),
        Case("payload list", lambda s: s.put([Bad("d", [1, 2])]), TypeError, ("payload",)),
        # keys that are not str, wherever a key goes
        Case("batch key int", lambda s: s.put([Bad(1, b"11")]), TypeError, ("key", "str")),
        Case("batch key bool", lambda s: s.put([Bad(True, b"11")]), TypeError, ("key", "str")),
        Case("batch key bytes", lambda s: s.put([Bad(b"a", b"11")]), TypeError, ("key", "str")),
        Case("batch key None after good", lambda s: s.put([ok, Bad(None, b"11")]), TypeError, ("key", "str")),
        Case("retain key int", lambda s: s.put([ok], retain_keys=["b", 1]), TypeError, ("key", "str")),
        Case("release key int", lambda s: s.put([ok], release_keys=["a", 1]), TypeError, ("key", "str")),
        Case("get key int", lambda s: s.get_concatenated(["a", 1]), TypeError, ("key", "str")),
        Case("get key bytes", lambda s: s.get_concatenated([b"a"]), TypeError, ("key", "str")),
        Case("read_into key None", lambda s: s.read_into(["a", None], bytearray(4)), TypeError, ("key", "str")),
        # a key list (or batch) given as a str, bytes or non-iterable
        Case("retain as str", lambda s: s.put([], retain_keys="b"), TypeError, ("key",)),
        Case("release as str", lambda s: s.put([], release_keys="a"), TypeError, ("key",)),
        Case("get as str", lambda s: s.get_concatenated("a"), TypeError, ("key",)),
        Case("get as bytes", lambda s: s.get_concatenated(b"a"), TypeError, ("key",)),
        Case("read_into as str", lambda s: s.read_into("a", bytearray(2)), TypeError, ("key",)),
        Case("retain not iterable", lambda s: s.put([], retain_keys=5), TypeError, ("key",)),
        Case("batch as str", lambda s: s.put("ab"), TypeError, ("batch",)),
        Case("batch None", lambda s: s.put(None), TypeError, ("batch",)),
        # objects without key and payload
        Case("object()", lambda s: s.put([object()]), TypeError, ("key", "payload")),
        Case("tuple object", lambda s: s.put([("d", b"dd")]), TypeError, ("key", "payload")),
        Case("dict object", lambda s: s.put([{"key": "d", "payload": b"dd"}]), TypeError, ("key", "payload")),
        # over-release
        Case("release never referenced", lambda s: s.put([], release_keys=["b"]), UnreferencedKeyError, ("release",)),
        Case(
            "release twice past zero", lambda s: s.put([], release_keys=["a", "a"]), UnreferencedKeyError, ("release",)
        ),
        Case(
            "release thrice of two",
            lambda s: s.put([ok], release_keys=["x", "x", "x"]),
            UnreferencedKeyError,
            ("release",),
        ),
        Case(
            "over-release after retain",
            lambda s: s.put([ok], retain_keys=["b"], release_keys=["b", "a", "b"]),
            UnreferencedKeyError,
            ("release",),
        ),
        # reads that cannot be served
        Case("read_into short buffer", lambda s: s.read_into(["a", "b"], bytearray(3)), ValueError, ("buffer",)),
        Case("read_into empty buffer", lambda s: s.read_into(["a"], bytearray()), ValueError, ("buffer",)),
        Case("read_into bytes buffer", lambda s: s.read_into(["a"], b"\0\0"), TypeError, ("buffer",)),
        Case(
            "read_into read-only view",
            lambda s: s.read_into(["a"], memoryview(bytearray(2)).toreadonly()),
            TypeError,
            ("buffer",),
        ),
        Case("read_into list buffer", lambda s: s.read_into(["a"], [0, 0]), TypeError, ("buffer",)),
    ]
    return cases


@pytest.mark.parametrize("case", _cases(), ids=lambda c: c.name)
def test_bad_input_is_typed_readable_and_changes_nothing(case: Case) -> None:
    store = populated()
    before = store.state
    stored_before = len(store)
    with pytest.raises(case.error) as info:
        case.call(store)
    _assert_readable(info.value, case.words)
    assert store.state == before
    assert len(store) == stored_before


def test_over_release_is_both_store_error_and_key_error() -> None:
    store = populated()
    before = store.state
    with pytest.raises(UnreferencedKeyError) as info:
        store.put([], retain_keys=["c"], release_keys=["c", "c"])
    # Callers written against vLLM catch KeyError; auxstore callers the base.
    assert isinstance(info.value, KeyError)
    assert isinstance(info.value, BlockObjectStoreError)
    assert store.state == before


def test_short_buffer_is_not_written() -> None:
    store = populated()
    buffer = bytearray(b"???")
    with pytest.raises(ValueError, match="buffer"):
        store.read_into(["a", "b"], buffer)
    assert buffer == b"???"


# ----------------------------------------------------------------- after close


_AFTER_CLOSE: list[tuple[str, Call]] = [
    ("put", lambda s: s.put([BlockObject("d", b"dd")])),
    ("put empty", lambda s: s.put([])),
    ("put pins only", lambda s: s.put([], retain_keys=["a"], release_keys=["a"])),
    ("put bad payload", lambda s: s.put([BlockObject("d", b"d")])),
    ("get", lambda s: s.get_concatenated(["a"])),
    ("get empty", lambda s: s.get_concatenated([])),
    ("read_into", lambda s: s.read_into(["a"], bytearray(2))),
    ("read_into empty", lambda s: s.read_into([], bytearray())),
    ("len", len),
    ("in", lambda s: "a" in s),
    ("stats", lambda s: s.stats()),
    ("flush", lambda s: s.flush()),
]


@pytest.mark.parametrize(("name", "call"), _AFTER_CLOSE, ids=[name for name, _ in _AFTER_CLOSE])
def test_every_call_after_close_raises_runtime_error(name: str, call: Call) -> None:
    store = populated()
    store.close()
    before = store.state
    assert before.closed and before.entries == () and before.refs == ()
    with pytest.raises(RuntimeError) as info:
        call(store)
    # The closed error is a plain RuntimeError, as in vLLM, not a store error.
    assert type(info.value) is RuntimeError
    _assert_readable(info.value, ("closed",))
    assert store.state == before


def test_close_again_is_fine() -> None:
    store = populated()
    store.close()
    closed = store.state
    store.close()
    with pytest.raises(RuntimeError, match="closed"), store:  # entering is a call on the store
        pass
    assert store.state == closed
    assert store.snapshot() == ((), (), True)


# ----------------------------------------------------------------- constructor


_BAD_CONSTRUCTORS: list[tuple[str, dict[str, Any], type[BaseException], tuple[str, ...]]] = [
    # The message states the rule and repeats the value given.
    ("object_nbytes zero", {"max_bytes": 8, "object_nbytes": 0}, ValueError, ("object_nbytes > 0", "object_nbytes=0")),
    ("object_nbytes negative", {"max_bytes": 8, "object_nbytes": -2}, ValueError, ("object_nbytes=-2",)),
    ("max_bytes below object", {"max_bytes": 3, "object_nbytes": 4}, ValueError, ("max_bytes >=", "max_bytes=3")),
    ("max_bytes negative", {"max_bytes": -1, "object_nbytes": 1}, ValueError, ("max_bytes=-1",)),
    ("max_bytes bool", {"max_bytes": True, "object_nbytes": 1}, TypeError, ("max_bytes=True",)),
    ("object_nbytes bool", {"max_bytes": 8, "object_nbytes": True}, TypeError, ("object_nbytes=True",)),
    ("max_bytes float", {"max_bytes": 8.0, "object_nbytes": 2}, TypeError, ("max_bytes=8.0",)),
    ("object_nbytes float", {"max_bytes": 8, "object_nbytes": 2.0}, TypeError, ("object_nbytes=2.0",)),
    ("max_bytes str", {"max_bytes": "8", "object_nbytes": 2}, TypeError, ("max_bytes='8'",)),
    ("object_nbytes None", {"max_bytes": 8, "object_nbytes": None}, TypeError, ("object_nbytes=None",)),
    ("unknown profile", {"max_bytes": 8, "object_nbytes": 2, "profile": "lenient"}, ValueError, ("'lenient'",)),
    ("profile case", {"max_bytes": 8, "object_nbytes": 2, "profile": "Strict"}, ValueError, ("'Strict'",)),
]


@pytest.mark.parametrize(
    ("name", "kwargs", "error", "words"), _BAD_CONSTRUCTORS, ids=[case[0] for case in _BAD_CONSTRUCTORS]
)
def test_bad_constructor_arguments(
    name: str, kwargs: dict[str, Any], error: type[BaseException], words: tuple[str, ...]
) -> None:
    with pytest.raises(error) as info:
        ReferenceStore(**kwargs)
    assert type(info.value) is error
    _assert_readable(info.value, words)


def test_smallest_valid_constructor_is_accepted() -> None:
    # The boundary next to the rejected cases: one object exactly fits.
    store = ReferenceStore(max_bytes=3, object_nbytes=3)
    assert store.capacity == 1 and store.state.entries == ()


# ------------------------------------------------------------- message detail
# The message names the offending value, so a caller can find it in a batch
# of thousands.


def test_payload_error_names_key_and_lengths() -> None:
    store = populated()
    with pytest.raises(ValueError) as info:
        store.put([BlockObject("dkey", b"ddd")])
    message = str(info.value)
    assert "dkey" in message and "3" in message and "2" in message


def test_over_release_names_the_key() -> None:
    store = populated()
    with pytest.raises(UnreferencedKeyError) as info:
        store.put([], release_keys=["bkey"])
    assert "bkey" in str(info.value)


def test_type_error_names_the_type() -> None:
    store = populated()
    with pytest.raises(TypeError) as info:
        store.put([Bad(1.5, b"dd")])
    assert "float" in str(info.value)


def _assert_readable(error: BaseException, words: tuple[str, ...]) -> None:
    message = str(error)
    # A KeyError's str() is the repr of its argument; strict's error must read as prose.
    assert not message.startswith(("'", '"')), message
    assert len(message) >= 20, message
    lowered = message.lower()
    for word in words:
        assert word.lower() in lowered, f"{word!r} not in {message!r}"
