"""BlockObjectStore beyond vLLM's API: stats, len, in, context manager,
read_into, check_invariants, and eviction that never scans pinned keys."""

from __future__ import annotations

import array
import mmap
from collections.abc import Callable
from typing import Any

import pytest

from auxspec.reference.store import ReferenceStore
from auxstore import BlockObject, BlockObjectStore, MissingKeyError, StoreStats
from auxstore._store import InvariantError


def _store(capacity: int = 4, nbytes: int = 4) -> BlockObjectStore:
    return BlockObjectStore(max_bytes=capacity * nbytes, object_nbytes=nbytes)


def _objects(keys: str, nbytes: int = 4) -> list[BlockObject]:
    return [BlockObject(key, key.encode() * nbytes) for key in keys]


def test_sizes() -> None:
    store = BlockObjectStore(max_bytes=23, object_nbytes=5)
    assert (store.capacity, store.num_slots, store.object_nbytes) == (4, 4, 5)
    assert "capacity=4" in repr(store)


def test_len_and_contains_do_not_touch_recency() -> None:
    store = _store()
    store.put(_objects("abc"))
    before = store.snapshot()
    assert len(store) == 3
    assert "a" in store and "c" in store
    assert "z" not in store and 1 not in store and [1] not in store
    assert store.snapshot() == before
    # "a" is still least recent, so it is the one evicted.
    store.put(_objects("de"))
    assert "a" not in store and "b" in store


def test_stats_counts_what_it_says() -> None:
    store = _store(capacity=3)
    assert store.stats() == StoreStats(
        stored=0, capacity=3, pinned=0, hits=0, misses=0, evictions=0, capacity_failures=0
    )
    store.put(_objects("abc"), retain_keys=["a", "x"])  # x: referenced, not stored
    store.get_concatenated(["b", "b", "c"])  # a repeated key counts each time
    with pytest.raises(MissingKeyError):
        store.get_concatenated(["b", "zz", "yy"])  # one failed read, one miss
    with pytest.raises(ValueError):
        store.read_into(["b"], bytearray(1))  # short buffer: neither hit nor miss
    store.put(_objects("de"))  # evicts b and c
    with pytest.raises(RuntimeError):
        store.put(_objects("fgh"))  # only d, e evictable: capacity failure
    snapshot = store.snapshot()
    assert store.stats() == StoreStats(
        stored=3, capacity=3, pinned=1, hits=3, misses=1, evictions=2, capacity_failures=1
    )
    assert store.snapshot() == snapshot


def test_stats_match_the_reference() -> None:
    ours, spec = _store(capacity=2), ReferenceStore(max_bytes=8, object_nbytes=4)
    for store in (ours, spec):
        store.put(_objects("ab"), retain_keys=["a"])
        store.get_concatenated(["a", "b"])
        store.put(_objects("c"), release_keys=["a"])
        store.read_into(["c"], bytearray(4))
        with pytest.raises(RuntimeError):
            store.get_concatenated(["b"])
    assert ours.stats() == spec.stats()
    assert ours.snapshot() == spec.snapshot()


def test_context_manager_closes() -> None:
    with _store() as store:
        store.put(_objects("a"))
        assert store.get_concatenated(["a"]) == b"aaaa"
    assert store.snapshot().closed
    with pytest.raises(RuntimeError):
        store.get_concatenated(["a"])


def test_context_manager_closes_on_error() -> None:
    store = _store()
    with pytest.raises(ZeroDivisionError), store:
        store.put(_objects("a"))
        _ = 1 / 0
    assert store.snapshot() == ((), (), True)


def test_flush_is_a_no_op_until_closed() -> None:
    store = _store()
    store.put(_objects("ab"))
    before = store.snapshot()
    store.flush()
    assert store.snapshot() == before
    store.close()
    with pytest.raises(RuntimeError):
        store.flush()


@pytest.mark.parametrize("nbytes", [3, 4096, 6144])
def test_read_into_writes_the_prefix_and_moves_like_get(nbytes: int) -> None:
    reader, getter = _store(nbytes=nbytes), _store(nbytes=nbytes)
    for store in (reader, getter):
        store.put(_objects("abcd", nbytes))
    keys = ["c", "a", "c"]
    expected = getter.get_concatenated(keys)
    buffer = bytearray(b"\xee" * (3 * nbytes + 5))
    assert reader.read_into(keys, buffer) == 3 * nbytes
    assert buffer[: 3 * nbytes] == expected
    assert buffer[3 * nbytes :] == b"\xee" * 5
    assert reader.snapshot() == getter.snapshot()
    assert [key for key, _ in reader.snapshot().entries] == ["b", "d", "a", "c"]


@pytest.mark.parametrize(
    "make",
    [
        lambda n: memoryview(bytearray(n)),
        lambda n: array.array("B", bytes(n)),
        lambda n: array.array("H", bytes(n + n % 2)),  # a multi-byte format: raw bytes
        lambda n: memoryview(bytearray(n)).cast("B", (1, n)),  # two-dimensional
        lambda n: mmap.mmap(-1, n),
    ],
    ids=["memoryview", "array-B", "array-H", "2d", "mmap"],
)
@pytest.mark.parametrize("nbytes", [4, 4096])
def test_read_into_any_writable_contiguous_buffer(make: object, nbytes: int) -> None:
    store = _store(nbytes=nbytes)
    store.put(_objects("ab", nbytes))
    buffer = make(2 * nbytes)  # type: ignore[operator]
    assert store.read_into(["b", "a"], buffer) == 2 * nbytes
    assert bytes(memoryview(buffer).cast("B")[: 2 * nbytes]) == b"b" * nbytes + b"a" * nbytes


def test_read_into_nothing() -> None:
    store = _store()
    store.put(_objects("a"))
    assert store.read_into([], bytearray()) == 0
    assert store.get_concatenated([]) == b""


def test_read_into_releases_the_callers_buffer() -> None:
    store = _store()
    store.put(_objects("a"))
    buffer = bytearray(4)
    store.read_into(["a"], buffer)
    buffer.extend(b"more")  # would raise BufferError if a view were still exported
    with pytest.raises(TypeError):
        store.read_into(["a"], bytes(4))
    assert len(buffer) == 8


def test_payloads_are_copied_from_any_buffer() -> None:
    store = _store()
    source = bytearray(b"wxyz")
    payloads: list[Any] = [source, memoryview(b"1234"), array.array("B", b"5678")]
    store.put([BlockObject(key, payload) for key, payload in zip("abc", payloads, strict=True)])
    source[:] = b"!!!!"  # a later change does not leak in
    assert store.get_concatenated(["a", "b", "c"]) == b"wxyz12345678"


def test_first_write_wins_and_batches_dedupe_to_the_last_payload() -> None:
    store = _store()
    store.put([BlockObject("a", b"1111"), BlockObject("b", b"2222"), BlockObject("a", b"3333")])
    assert [key for key, _ in store.snapshot().entries] == ["a", "b"]
    assert store.get_concatenated(["a"]) == b"3333"
    store.put([BlockObject("a", b"9999")])
    assert store.get_concatenated(["a"]) == b"3333"


def test_accepts_vllm_block_objects() -> None:
    from auxspec.engine import target as targets

    module = targets.load_upstream()
    if module is None:
        pytest.skip("vLLM's module (../shared/upstream/vllm_store.py or $AUXSTORE_UPSTREAM) is not available")
    store = _store()
    store.put([module.BlockObject(key="a", payload=b"aaaa")])
    assert store.get_concatenated(["a"]) == b"aaaa"


def test_slots_are_reused_and_never_exceed_capacity() -> None:
    store = _store(capacity=3)
    for round_ in range(10):
        store.put(_objects("abc") if round_ % 2 else _objects("def"))
        store.check_invariants()
    assert store._made == 3
    assert store.get_concatenated(["a", "b", "c"]) == b"aaaabbbbcccc"


def test_check_invariants_finds_a_shared_slot() -> None:
    store = _store()
    store.put(_objects("ab"))
    store.check_invariants()
    store._lru["b"] = store._lru["a"]  # corrupt: two keys, one slot
    with pytest.raises(InvariantError, match="share slot"):
        store.check_invariants()


def test_check_invariants_finds_a_lost_slot() -> None:
    store = _store()
    store.put(_objects("ab"))
    del store._lru["a"]  # corrupt: a's slot is neither used nor free
    with pytest.raises(InvariantError, match="allocated"):
        store.check_invariants()


@pytest.mark.parametrize(
    ("corrupt", "message"),
    [
        (lambda store: store._lru.__setitem__("b", store._pinned.pop("b")), "hold a reference but are listed"),
        (lambda store: store._pinned.__setitem__("a", store._lru.pop("a")), "listed as pinned but hold no reference"),
        (lambda store: store._lru.__setitem__("b", store._pinned["b"]), "both pinned and unpinned"),
    ],
    ids=["pinned-listed-evictable", "unreferenced-listed-pinned", "in-both-tables"],
)
def test_check_invariants_finds_a_key_in_the_wrong_table(
    corrupt: Callable[[BlockObjectStore], None], message: str
) -> None:
    store = _store()
    store.put(_objects("abc"), retain_keys=["b"])
    store.check_invariants()
    assert list(store._lru) == ["a", "c"] and list(store._pinned) == ["b"]
    corrupt(store)
    with pytest.raises(InvariantError, match=message):
        store.check_invariants()
    assert issubclass(InvariantError, AssertionError)


class _CountingKey(str):
    """A key that counts how often it is hashed: each hash is a key looked at."""

    hashes = 0

    def __hash__(self) -> int:
        _CountingKey.hashes += 1
        return str.__hash__(self)


@pytest.mark.parametrize("pinned", [10, 1000])
def test_eviction_never_looks_at_pinned_keys(pinned: int) -> None:
    # Many pinned keys at the least recent end: vLLM looks at every one of
    # them on each evicting put; here a put looks at none of them, so the
    # work per put does not grow with their number.
    store = BlockObjectStore(max_bytes=(pinned + 4) * 2, object_nbytes=2)
    old = [_CountingKey(f"pinned{i}") for i in range(pinned)]
    store.put([BlockObject(key, b"pp") for key in old], retain_keys=old)
    store.put([BlockObject(f"k{i}", b"kk") for i in range(4)])
    _CountingKey.hashes = 0
    for round_ in range(20):
        store.put([BlockObject(f"n{round_}.{i}", b"nn") for i in range(2)])  # each evicts two
    assert _CountingKey.hashes == 0
    assert store.stats().evictions == 40
    assert store.stats().pinned == pinned
    store.check_invariants()


def test_released_key_enters_the_evictable_order_at_the_recent_end() -> None:
    ours, spec = _store(capacity=3), ReferenceStore(max_bytes=12, object_nbytes=4)
    for store in (ours, spec):
        store.put([], retain_keys=["a"])  # pinned before it is stored
        store.put(_objects("abc"))
        store.get_concatenated(["a"])  # a pinned key still moves
        store.put([], release_keys=["a"])  # terminal: most recent
        store.put(_objects("d"))  # evicts b, the least recent unpinned key
    assert ours.snapshot() == spec.snapshot()
    assert [key for key, _ in ours.snapshot().entries] == ["c", "a", "d"]
    ours.check_invariants()


def test_without_numpy_there_is_no_gather_and_reads_copy_in_python(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from auxstore import _store as store_module
    from auxstore._gather import numpy_gather

    monkeypatch.setitem(sys.modules, "numpy", None)  # `import numpy` now raises ImportError
    gather = numpy_gather.__wrapped__()  # type: ignore[attr-defined]  # the uncached loader
    assert gather is None
    monkeypatch.setattr(store_module, "numpy_gather", lambda: gather)
    store = _store(capacity=40, nbytes=2)
    store.put([BlockObject(f"k{i}", bytes([i, i])) for i in range(40)])
    keys = [f"k{(i * 7) % 40}" for i in range(40)]  # scattered: the gather would be taken
    buffer = bytearray(80)
    assert store.read_into(keys, buffer) == 80
    assert buffer == b"".join(bytes([int(k[1:])] * 2) for k in keys)
