"""A divergence is named a documented deviation only when it is that
deviation exactly: the op, the spec's outcome, the target's outcome and,
where the deviation says how the state changes, the target's state. Each
deviation below is shown on vLLM's module, and a near miss of it (a port
that fails on the same op in another way) must not be named."""

from __future__ import annotations

from typing import Any

import pytest

from auxspec.engine.compare import compare
from auxspec.engine.ops import Bad, Get, Put, Trace
from auxspec.engine.target import Target, load_upstream, observe_vllm

UPSTREAM = load_upstream()
needs_upstream = pytest.mark.skipif(UPSTREAM is None, reason="vLLM's module (../shared/upstream) is not available")


def _target(cls: Any) -> Target:
    return Target(cls.__name__, lambda m, n: cls(max_bytes=m, object_nbytes=n), observe_vllm)


def _deviation(cls: Any, trace: Trace) -> str | None:
    found = compare(trace, _target(cls))
    assert found is not None, "the port must diverge from strict here"
    return found.deviation


CAPACITY = Trace("strict", 2, 1, (Put((("a", b"1"),), ("a",)), Put((("b", b"2"), ("c", b"3")), ("y",))))
OVER_RELEASE = Trace("strict", 2, 1, (Put((("a", b"1"),), ("a",)), Put((), ("b",), ("a", "a"))))
NON_STR_KEY = Trace("strict", 2, 1, (Put(((1, b"1"),)),))
BOOL_SIZE = Trace("strict", True, 1)
SHAPE = Trace("strict", 2, 1, (Put((), Bad("str")),))
ITERATOR = Trace("strict", 2, 1, (Put((("a", b"1"), ("b", b"2"))), Get(("a",), form="iter"), Put((("c", b"3"),))))


@needs_upstream
@pytest.mark.parametrize(
    ("trace", "name"),
    [
        (CAPACITY, "capacity-error-half-applied"),
        (OVER_RELEASE, "over-release-half-applied"),
        (NON_STR_KEY, "non-str-key-accepted"),
        (BOOL_SIZE, "bool-size-accepted"),
        (SHAPE, "shape-not-checked"),
    ],
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_vllm_is_named_by_its_deviation(trace: Trace, name: str) -> None:
    assert UPSTREAM is not None
    assert _deviation(UPSTREAM.BlockObjectStore, trace) == name


def _vllm_variant(**methods: Any) -> Any:
    assert UPSTREAM is not None
    return type("Variant", (UPSTREAM.BlockObjectStore,), methods)


@needs_upstream
def test_a_capacity_error_that_changes_something_else_is_not_the_deviation() -> None:
    # Fails as the spec does, but also keeps the batch it could not fit.
    def put(self: Any, objects: Any, *, retain_keys: Any = (), release_keys: Any = ()) -> None:
        try:
            UPSTREAM.BlockObjectStore.put(self, objects, retain_keys=retain_keys, release_keys=release_keys)
        except UPSTREAM.BlockObjectStoreError:
            self._references["leaked"] = 1
            raise

    assert _deviation(_vllm_variant(put=put), CAPACITY) is None


@needs_upstream
def test_a_store_with_room_to_spare_is_not_the_capacity_deviation() -> None:
    # Rounds the capacity up: the put that must fail succeeds.
    def init(self: Any, *, max_bytes: int, object_nbytes: int) -> None:
        UPSTREAM.BlockObjectStore.__init__(self, max_bytes=max_bytes + object_nbytes, object_nbytes=object_nbytes)
        self.num_slots = max_bytes // object_nbytes  # reports the spec's size, keeps one more slot

    assert _deviation(_vllm_variant(__init__=init, _evict_to_fit=_lenient_evict), CAPACITY) is None


def _lenient_evict(self: Any, protected: set[str]) -> None:
    excess = len(self._lru) - self.num_slots - 1
    victims = [key for key in self._lru if key not in self._references and key not in protected][: max(excess, 0)]
    for victim in victims:
        slot = self._lru.pop(victim)
        if slot != self._UNALLOCATED_SLOT:
            self._free_slots.append(slot)


@needs_upstream
def test_an_over_release_that_undoes_its_retains_is_not_the_deviation() -> None:
    # Raises the bare KeyError vLLM raises, but puts the counts back: neither
    # strict's "nothing changes" (the error class is vLLM's) nor vLLM's state.
    def put(self: Any, objects: Any, *, retain_keys: Any = (), release_keys: Any = ()) -> None:
        before = dict(self._references)
        try:
            UPSTREAM.BlockObjectStore.put(self, objects, retain_keys=retain_keys, release_keys=release_keys)
        except KeyError:
            self._references = {**before, "b": 5}
            raise

    assert _deviation(_vllm_variant(put=put), OVER_RELEASE) is None


@needs_upstream
def test_a_non_str_key_refused_with_the_wrong_error_is_not_the_deviation() -> None:
    def put(self: Any, objects: Any, *, retain_keys: Any = (), release_keys: Any = ()) -> None:
        if any(not isinstance(obj.key, str) for obj in objects):
            raise ValueError("keys must be str")  # a payload error, not a type error: a plain bug
        UPSTREAM.BlockObjectStore.put(self, objects, retain_keys=retain_keys, release_keys=release_keys)

    assert _deviation(_vllm_variant(put=put), NON_STR_KEY) is None


@needs_upstream
def test_a_bool_size_refused_with_the_wrong_error_is_not_the_deviation() -> None:
    def init(self: Any, *, max_bytes: Any, object_nbytes: Any) -> None:
        if isinstance(max_bytes, bool):
            raise ValueError("no bools")  # the spec wants a type error
        UPSTREAM.BlockObjectStore.__init__(self, max_bytes=max_bytes, object_nbytes=object_nbytes)

    assert _deviation(_vllm_variant(__init__=init), BOOL_SIZE) is None


@needs_upstream
def test_an_iterator_read_that_returns_the_wrong_bytes_is_not_the_deviation() -> None:
    def get_concatenated(self: Any, keys: Any) -> bytes:
        keys = list(keys)
        return UPSTREAM.BlockObjectStore.get_concatenated(self, keys)[::-1] + b"?"

    assert _deviation(_vllm_variant(get_concatenated=get_concatenated), ITERATOR) is None
