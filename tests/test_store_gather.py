"""The optional one-call gather (auxstore._gather, numpy) against the pure
copy: the same bytes, the same return value or error, the same recency and
counters, on stores of one chunk and of several.

Two stores see the same calls; one reads with the pure copy only, the other
with the gather on every read it can take (any key count, runs included), so
every read of the second goes through numpy where the store would let it."""

from __future__ import annotations

import array
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import auxstore._store as store_module
from auxstore import BlockObject, BlockObjectStore

numpy = pytest.importorskip("numpy", reason="the gather needs numpy (the fast extra; the dev extra has it)")

POOL = [f"k{i}" for i in range(24)]


@contextmanager
def pure() -> Iterator[None]:
    with mock.patch.object(store_module, "numpy_gather", lambda: None):
        yield


@contextmanager
def gather_everywhere() -> Iterator[None]:
    with (
        mock.patch.object(store_module, "_GATHER_MIN_KEYS", 1),
        mock.patch.object(store_module, "_mostly_scattered", lambda slots: True),
    ):
        yield


def _outcome(call: Any, *args: Any, **kwargs: Any) -> object:
    try:
        return ("ok", call(*args, **kwargs))
    except Exception as error:  # compared whole: the kind and the message
        return (type(error).__name__, str(error))


def _buffer(kind: str, nbytes: int) -> Any:
    if kind == "bytearray":
        return bytearray(b"\xee" * nbytes)
    if kind == "array":  # a multi-byte item format: read_into casts it to bytes
        return array.array("I", b"\xee" * (nbytes // 4 * 4))
    return numpy.full(nbytes, 0xEE, dtype=numpy.uint8)


ops = st.lists(
    st.one_of(
        st.tuples(
            st.just("put"), st.lists(st.sampled_from(POOL), max_size=8), st.lists(st.sampled_from(POOL), max_size=2)
        ),
        st.tuples(
            st.just("read"),
            st.lists(st.integers(0, 63), max_size=40),  # positions among the stored keys
            st.sampled_from(["bytearray", "array", "numpy"]),
            st.integers(-1, 2),  # buffer size against what the read needs: short, exact, longer
            st.booleans(),  # whether a key that is not stored is read too
        ),
        st.tuples(st.just("get"), st.lists(st.integers(0, 63), max_size=40), st.booleans()),
    ),
    max_size=25,
)


@settings(max_examples=150, deadline=None)
@given(
    capacity=st.integers(1, 20),
    nbytes=st.sampled_from([1, 4, 5, 64]),
    chunk_slots=st.sampled_from([None, 1, 3]),
    calls=ops,
)
def test_the_gather_and_the_pure_copy_agree(
    capacity: int, nbytes: int, chunk_slots: int | None, calls: list[Any]
) -> None:
    # chunk_slots: the arena's first chunk in slots (None: the default, one chunk), so several chunks are exercised.
    first_chunk = store_module._FIRST_CHUNK_BYTES if chunk_slots is None else chunk_slots * nbytes
    with mock.patch.object(store_module, "_FIRST_CHUNK_BYTES", first_chunk):
        plain = BlockObjectStore(max_bytes=capacity * nbytes, object_nbytes=nbytes)
        fast = BlockObjectStore(max_bytes=capacity * nbytes, object_nbytes=nbytes)
        for n, call in enumerate(calls):
            if call[0] == "put":
                objects = [BlockObject(k, _payload(k, n, nbytes)) for k in call[1]]
                outcomes = [_outcome(s.put, objects, retain_keys=call[2]) for s in (plain, fast)]
                assert outcomes[0] == outcomes[1]
            elif call[0] == "read":
                keys = _keys(plain, call[1], call[4])
                size = max(0, len(keys) * nbytes + call[3] * nbytes // 2 - (call[3] < 0))
                buffers = [_buffer(call[2], size), _buffer(call[2], size)]
                with pure():
                    expected = _outcome(plain.read_into, keys, buffers[0])
                with gather_everywhere():
                    got = _outcome(fast.read_into, keys, buffers[1])
                assert got == expected
                assert bytes(memoryview(buffers[1]).cast("B")) == bytes(memoryview(buffers[0]).cast("B"))
            else:
                keys = _keys(plain, call[1], call[2])
                with pure():
                    expected = _outcome(plain.get_concatenated, keys)
                with gather_everywhere():
                    got = _outcome(fast.get_concatenated, keys)
                assert got == expected
            assert fast.snapshot() == plain.snapshot()
            assert fast.stats() == plain.stats()
        fast.check_invariants()
        assert len(fast._chunks) == len(plain._chunks)
        plain.close()
        fast.close()  # no array of the gather still holds the arena


def _keys(store: BlockObjectStore, positions: list[int], absent: bool) -> list[str]:
    """Stored keys at these positions (repeats and any order), and at the middle a key not stored if ``absent``."""
    stored = [key for key, _ in store.snapshot().entries]
    keys = [stored[i % len(stored)] for i in positions] if stored else []
    if absent:
        keys.insert(len(keys) // 2, "never put")
    return keys


def _payload(key: str, n: int, nbytes: int) -> bytes:
    seed = (int(key[1:]) * 31 + n) % 251
    return bytes((seed + i) % 256 for i in range(nbytes))
