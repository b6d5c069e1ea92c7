"""Error messages keep vLLM's phrases, which vLLM users search for, and add auxstore's detail."""

from __future__ import annotations

import pytest

from auxspec.reference.store import ReferenceStore
from auxstore import BlockObject, BlockObjectStore, CapacityError, MissingKeyError

STORES = [BlockObjectStore, ReferenceStore]


@pytest.mark.parametrize("make", STORES, ids=lambda make: make.__name__)
def test_capacity_error_keeps_vllms_phrase(make: type[BlockObjectStore]) -> None:
    store = make(max_bytes=2, object_nbytes=1)
    store.put([BlockObject("a", b"a"), BlockObject("b", b"b")], retain_keys=["a", "b"])
    with pytest.raises(CapacityError, match=r"cannot retain the requested batch.*limit=2 objects"):
        store.put([BlockObject("c", b"c")])


@pytest.mark.parametrize("make", STORES, ids=lambda make: make.__name__)
def test_missing_key_error_keeps_vllms_phrases_and_names_the_key(make: type[BlockObjectStore]) -> None:
    store = make(max_bytes=2, object_nbytes=1)
    for read in (lambda: store.get_concatenated(["zz"]), lambda: store.read_into(["zz"], bytearray(1))):
        with pytest.raises(MissingKeyError) as info:
            read()
        message = str(info.value)
        assert "does not exist" in message and "'zz'" in message
        assert "Increase aux_output_config.max_bytes when a KV cache hit requires it" in message


@pytest.mark.parametrize("make", STORES, ids=lambda make: make.__name__)
def test_config_errors_keep_vllms_phrases(make: type[BlockObjectStore]) -> None:
    with pytest.raises(ValueError, match="object size must be positive"):
        make(max_bytes=4, object_nbytes=0)
    with pytest.raises(ValueError, match="must fit at least one object"):
        make(max_bytes=3, object_nbytes=4)


@pytest.mark.parametrize("make", STORES, ids=lambda make: make.__name__)
def test_repr_shows_profile_capacity_stored_and_pinned(make: type[BlockObjectStore]) -> None:
    store = make(max_bytes=12, object_nbytes=4)
    store.put([BlockObject("a", b"aaaa"), BlockObject("b", b"bbbb")], retain_keys=["b", "z"])
    text = repr(store)
    assert text.startswith(f"{make.__name__}(profile='strict', capacity=3, object_nbytes=4")
    assert "stored=2, pinned=1, referenced=2" in text
    store.close()
    assert repr(store).endswith("object_nbytes=4, closed)")


def test_repr_of_a_broken_store_names_the_interrupted_call() -> None:
    store = BlockObjectStore(max_bytes=4, object_nbytes=4)
    store._gate = "put!"  # as a put whose completion failed leaves it
    assert "broken by an interrupted put()" in repr(store)


def test_repr_of_the_upstream_reference_names_its_profile() -> None:
    assert "profile='upstream'" in repr(ReferenceStore(max_bytes=4, object_nbytes=4, profile="upstream"))
