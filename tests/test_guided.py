"""The coverage-guided phase of ``auxspec verify`` (``generators.guided`` and
``drivers.verify._Guided``): the target's own arcs steer the mutation of
codec inputs, judged by the one compare."""

from __future__ import annotations

import sys
from random import Random
from typing import Any

from auxspec.drivers.verify import Reach, _Guided
from auxspec.engine.target import Target, load_target
from auxspec.generators.guided import Arcs, Corpus
from auxstore import BlockObjectStore


def _branchy(x: int) -> int:
    if x > 3:
        return 1
    return 2


def test_arcs_count_new_branches_of_the_target_only_and_restore_the_tracer() -> None:
    before = sys.gettrace()
    arcs = Arcs(wanted=lambda filename: filename == __file__)
    with arcs:
        _branchy(5)
    first = arcs.fresh
    assert first > 0 and sys.gettrace() is before
    with arcs:
        _branchy(7)  # the same branch: nothing new
    assert arcs.fresh == first
    with arcs:
        _branchy(1)  # the other branch
    assert arcs.fresh > first
    none = Arcs(wanted=lambda filename: False)
    with none:
        _branchy(5)
    assert none.fresh == 0 and not none.seen


def test_mutations_stay_bytes_and_within_the_length() -> None:
    corpus = Corpus(Random(1), most=64)
    corpus.add(bytes(range(40)))
    corpus.add(b"")
    made = [corpus.next() for _ in range(500)]
    assert all(isinstance(data, bytes) and len(data) <= 64 for data in made)
    assert len(set(made)) > 400


class _LateOverflow(BlockObjectStore):
    """A planted bug behind a branch: the 3rd retain in one call is dropped."""

    def put(self, objects: Any, *, retain_keys: Any = (), release_keys: Any = ()) -> None:
        retains = list(retain_keys)
        if len(retains) >= 3:
            retains = retains[:2] + retains[3:]
        super().put(objects, retain_keys=retains, release_keys=release_keys)


def test_the_guided_search_grows_a_corpus_on_the_bundled_store_and_finds_a_planted_bug() -> None:
    bundled = load_target(None)
    search = _Guided(bundled, "strict", Random(4), frozenset())
    assert search.turn(3.0) is None
    assert len(search.corpus.inputs) > 8 and len(search.arcs.seen) > 200
    reach = Reach()
    search.record(reach)
    assert reach.phases["guided"]["traces"] == search.tried > 0 and reach.phases["guided"]["corpus"] > 8
    port = Target(
        "_LateOverflow", lambda m, n: _LateOverflow(max_bytes=m, object_nbytes=n), bundled.observe, bundled.features
    )
    found = None
    hunt = _Guided(port, "strict", Random(4), frozenset())
    for _ in range(10):
        found = hunt.turn(3.0)
        if found is not None:
            break
    assert found is not None
    assert len(found.trace.ops) <= 40  # shrunk
