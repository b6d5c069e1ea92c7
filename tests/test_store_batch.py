"""The one batch validator (``auxstore._batch``): everything by value, bad input typed."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from auxstore import BlockObject, BlockObjectStore
from auxstore._batch import Batch, as_key, check_batch, key_tuple, read_keys, safe_repr


@dataclass(frozen=True)
class PropertyObject:
    """Frozen, but its payload is a view of a buffer the caller keeps."""

    key: str
    buffer: bytearray

    @property
    def payload(self) -> bytearray:
        return self.buffer


class HashRaises(str):
    def __hash__(self) -> int:
        raise RuntimeError("no hash")


class LyingStr(str):
    def __hash__(self) -> int:
        return 1

    def __eq__(self, other: object) -> bool:
        return True


class FakeClass:
    @property  # type: ignore[misc]
    def __class__(self) -> type:  # isinstance(FakeClass(), str) is True
        return str


class BadRepr:
    def __repr__(self) -> str:
        raise ValueError("no repr")


def test_payload_behind_a_property_is_copied_at_the_call() -> None:
    buffer = bytearray(b"good")
    batch = check_batch([PropertyObject("a", buffer)], object_nbytes=4)
    buffer[:] = b"EVIL"
    assert batch.objects == {"a": b"good"}
    assert type(batch.objects["a"]) is bytes


def test_batch_is_deduplicated_first_position_last_payload() -> None:
    batch = check_batch(
        [BlockObject("a", b"1"), BlockObject("b", b"2"), BlockObject("a", b"3")],
        ["r"],
        iter(["s"]),
        object_nbytes=1,
    )
    assert batch == Batch({"a": b"3", "b": b"2"}, ("r",), ("s",))
    assert list(batch.objects) == ["a", "b"]


def test_no_size_check_without_object_nbytes() -> None:
    assert check_batch([BlockObject("a", b"xyz")], object_nbytes=None).objects == {"a": b"xyz"}
    with pytest.raises(ValueError, match="3 bytes; object_nbytes is 2"):
        check_batch([BlockObject("a", b"xyz")], object_nbytes=2)


def test_key_whose_hash_raises_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="cannot be hashed"):
        check_batch([BlockObject(HashRaises("a"), b"x")], object_nbytes=1)
    with pytest.raises(TypeError, match="cannot be hashed"):
        key_tuple([HashRaises("a")], "retain_keys")


def test_str_subclass_keys_are_taken_by_value() -> None:
    key = as_key(LyingStr("a"), "key")
    assert type(key) is str and key == "a"
    assert key_tuple((LyingStr("a"), "b"), "keys") == ("a", "b")
    assert all(type(k) is str for k in key_tuple([LyingStr("a")], "keys"))
    assert all(type(k) is str for k in read_keys([LyingStr("x")]))


def test_fake_class_and_broken_repr_keys_are_type_errors() -> None:
    for bad in (FakeClass(), BadRepr()):
        with pytest.raises(TypeError, match="must be a str"):
            check_batch([BlockObject(bad, b"x")], object_nbytes=1)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="must be a str"):
            read_keys([bad])
    assert "broken __repr__" in safe_repr(BadRepr())


def test_read_keys_returns_a_list_of_exact_str_unchanged() -> None:
    keys = ["a", "b"]
    assert read_keys(keys) is keys
    assert read_keys(("a",)) == ["a"]
    with pytest.raises(TypeError, match="iterable of str keys"):
        read_keys("ab")


def test_store_refuses_hostile_keys_and_changes_nothing() -> None:
    store = BlockObjectStore(max_bytes=4, object_nbytes=1)
    store.put([BlockObject("a", b"1")], retain_keys=["a"])
    before = store.snapshot()
    for bad in (FakeClass(), BadRepr(), HashRaises("b")):
        with pytest.raises(TypeError):
            store.put([BlockObject(bad, b"1")])  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            store.put([], retain_keys=[bad])  # type: ignore[list-item]
        with pytest.raises(TypeError):
            store.get_concatenated([bad])  # type: ignore[list-item]
        assert store.snapshot() == before
    store.check_invariants()


def test_store_stores_a_copy_of_a_property_payload() -> None:
    store = BlockObjectStore(max_bytes=8, object_nbytes=4)
    buffer = bytearray(b"good")
    store.put([PropertyObject("a", buffer)])  # type: ignore[list-item]
    buffer[:] = b"EVIL"
    assert store.get_concatenated(["a"]) == b"good"
