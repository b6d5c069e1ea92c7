"""The coverage-guided phase of ``auxspec verify`` (``generators.guided`` and
``drivers.verify._Guided``): the target's own arcs steer the mutation of
codec inputs, judged by the one compare."""

from __future__ import annotations

import contextlib
import sys
from random import Random
from typing import Any

from auxspec.drivers.verify import Reach, _Guided
from auxspec.engine.target import Target, load_target
from auxspec.generators import guided
from auxspec.generators.guided import Arcs, Corpus, CoverageArcs
from auxstore import BlockObjectStore


def _branchy(x: int) -> int:
    if x > 3:
        return 1
    return 2


def test_arcs_count_new_branches_of_the_target_only_and_restore_the_tracer() -> None:
    before = sys.gettrace()
    arcs = Arcs(wanted=lambda filename: filename == __file__)
    branchy = arcs.around(_branchy)
    with arcs:
        assert branchy(5) == 1
    first = arcs.fresh
    assert first > 0 and sys.gettrace() is before
    with arcs:
        branchy(7)  # the same branch: nothing new
    assert arcs.fresh == first
    with arcs:
        _branchy(1)  # the other branch, but not a call wrapped by around: not traced
    assert arcs.fresh == first
    branchy(1)  # wrapped, but outside a recording: not traced either
    assert arcs.fresh == first and sys.gettrace() is before
    with arcs:
        branchy(1)  # the other branch
    assert arcs.fresh > first
    none = Arcs(wanted=lambda filename: False)
    with none:
        none.around(_branchy)(5)
    assert none.fresh == 0 and not none.seen


def test_the_c_tracer_counts_new_branches_of_the_target_only_and_resumes_a_measurement() -> None:
    import coverage

    recorder = guided.target_arcs()
    assert isinstance(recorder, CoverageArcs)  # coverage.py is a dependency of the verify extra
    module: dict[str, Any] = {}
    exec(compile(_BRANCHY, "/nonexistent/auxspec-test/branchy.py", "exec"), module)
    branchy = recorder.around(module["branchy"])
    outer = coverage.Coverage(data_file=None, config_file=False)  # as pytest-cov measures a test run
    outer.start()
    try:
        with recorder:
            assert branchy(5) == 1
        first = recorder.fresh
        assert first > 0 and type(sys.gettrace()).__name__ == "CTracer"  # the outer measurement goes on
        with recorder:
            branchy(7)  # the same branch: nothing new
        assert recorder.fresh == first
        with recorder:
            module["branchy"](1)  # the other branch, but not a call wrapped by around: not traced
        assert recorder.fresh == first
        with recorder:
            branchy(1)  # the other branch
        assert recorder.fresh > first
        before = recorder.fresh
        with recorder:
            recorder.around(Reach().phase)("x", 1, 1.0, 1)  # the spec's own code: not the target's
        assert recorder.fresh == before == recorder.count
    finally:
        outer.stop()
    assert sys.gettrace() is None


def test_the_c_tracer_records_a_target_that_raises_and_stays_balanced() -> None:
    recorder = guided.target_arcs()
    assert isinstance(recorder, CoverageArcs)
    module: dict[str, Any] = {}
    exec(compile(_RAISES, "/nonexistent/auxspec-test/raises.py", "exec"), module)
    raises = recorder.around(module["raises"])
    for x in (5, 1, 5):  # an exception unwinds the traced frames: later calls are still recorded
        with recorder, contextlib.suppress(ValueError):
            raises(x)
        assert sys.gettrace() is None
    assert recorder.count >= 4  # the entry, both branches and the two exits


def test_the_python_tracer_on_request(monkeypatch: Any) -> None:
    monkeypatch.setenv("AUXSPEC_PYTHON_TRACER", "1")
    assert isinstance(guided.target_arcs(), Arcs)


def test_without_coverage_py_the_python_tracer_records(monkeypatch: Any) -> None:
    monkeypatch.setitem(sys.modules, "coverage", None)  # import coverage: ImportError
    assert isinstance(guided.target_arcs(), Arcs)


_BRANCHY = "def branchy(x):\n    if x > 3:\n        return 1\n    return 2\n"
_RAISES = "def raises(x):\n    if x > 3:\n        raise ValueError(x)\n    return 2\n"


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
    assert len(search.corpus.inputs) > 8 and search.arcs.count > 200
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


def test_a_target_whose_arcs_are_not_recorded_is_still_searched() -> None:
    # A port installed as a package: neither tracer records its files' arcs,
    # so no input is kept for a new one; the seeds are mutated instead.
    search = _Guided(load_target(None), "strict", Random(1), frozenset(), Arcs(wanted=lambda filename: False))
    assert search.turn(0.5) is None
    assert search.tried > 8 and len(search.corpus.inputs) == 8 and search.arcs.count == 0
