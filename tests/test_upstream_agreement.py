"""The ``upstream`` profile agrees with vLLM's own module on every valid input.

Every return value, exception class and snapshot is compared after each step
(see ``auxspec.drivers.upstream_agreement``). A failure here on a valid input means the
spec is wrong, unless DESIGN.md lists the case as a deviation.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from auxspec.drivers.upstream_agreement import (
    DivergenceFound,
    construct_both,
    error_label,
    programs,
    reference_outcomes,
    run_agreement,
    upstream_trace,
)
from auxspec.engine.ops import Close, Get, Put, Trace
from auxspec.engine.target import UPSTREAM_ENV, load_module_from_path, load_upstream, observe_vllm, upstream_path
from auxspec.reference.store import ReferenceStore
from auxstore import BlockObjectStoreError, UnreferencedKeyError

_UPSTREAM = load_upstream()
needs_upstream = pytest.mark.skipif(
    _UPSTREAM is None,
    reason="vLLM's module not found: set AUXSTORE_UPSTREAM or put it at ../shared/upstream/vllm_store.py",
)


@pytest.fixture
def vllm() -> ModuleType:
    if _UPSTREAM is None:
        pytest.skip("vLLM's module not found: set AUXSTORE_UPSTREAM or put it at ../shared/upstream/vllm_store.py")
    return _UPSTREAM


# Programs that reach each corner at least once whatever Hypothesis draws.
_CORNERS = [
    # capacity failure with a re-put move, a terminal move and a new key
    upstream_trace(
        3,
        1,
        (
            Put((("a", b"1"), ("b", b"2"), ("c", b"3")), retain=("a", "b")),
            Put((("c", b"9"), ("d", b"4")), retain=("c",), release=("a",)),
            Get(("a", "b", "c")),
        ),
    ),
    # over-release after a retain and a release that reached zero in one call
    upstream_trace(
        4, 2, (Put((("x", b"xx"),), retain=("x", "y")), Put(retain=("z",), release=("x", "x")), Get(("x",)))
    ),
    # refcount 0 -> 1 -> 0 inside one put; a terminal batch key is evictable
    upstream_trace(2, 2, (Put((("p", b"pp"),)), Put((("q", b"qq"),), retain=("q",), release=("q",)), Get(("q",)))),
    # duplicate keys inside a batch: first position, last payload
    upstream_trace(3, 1, (Put((("a", b"1"), ("b", b"2"), ("a", b"3"))), Get(("a", "b")))),
    # calls after close
    upstream_trace(1, 1, (Put((("a", b"1"),)), Close(), Get(()), Put(), Close(), Get(("a",)))),
]


@pytest.mark.parametrize("program", _CORNERS, ids=[f"corner{i}" for i in range(len(_CORNERS))])
def test_corner_programs_agree(vllm: ModuleType, program: Trace) -> None:
    assert run_agreement(vllm, program) == len(program.ops)


@needs_upstream
@pytest.mark.slow
@pytest.mark.timeout(240)
@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(program=programs())
def test_random_programs_agree(program: Trace) -> None:
    assert _UPSTREAM is not None
    run_agreement(_UPSTREAM, program)


@needs_upstream
@settings(max_examples=300, deadline=None)
@given(max_bytes=st.integers(-3, 40), object_nbytes=st.integers(-3, 12))
@example(max_bytes=0, object_nbytes=0)
@example(max_bytes=4, object_nbytes=5)
@example(max_bytes=5, object_nbytes=5)
@example(max_bytes=11, object_nbytes=5)
def test_constructor_agrees(max_bytes: int, object_nbytes: int) -> None:
    assert _UPSTREAM is not None
    reference, vllm = construct_both(_UPSTREAM, max_bytes, object_nbytes)
    assert reference == vllm
    valid = object_nbytes > 0 and max_bytes >= object_nbytes
    assert reference == (
        ("returned", (max_bytes // object_nbytes, object_nbytes)) if valid else ("raised", "ValueError")
    )


# ---------------------------------------------------- the comparison itself works


def test_error_labels_are_exact(vllm: ModuleType) -> None:
    assert error_label(vllm.BlockObjectStoreError("x"), vllm.BlockObjectStoreError) == "BlockObjectStoreError"
    assert error_label(BlockObjectStoreError("x"), BlockObjectStoreError) == "BlockObjectStoreError"
    # A subclass is not the base: the upstream profile must raise vLLM's exact class.
    assert error_label(UnreferencedKeyError("x"), BlockObjectStoreError).startswith("unexpected")
    assert error_label(KeyError("x"), BlockObjectStoreError) == "KeyError"
    assert error_label(RuntimeError("x"), BlockObjectStoreError) == "RuntimeError"
    assert error_label(ZeroDivisionError(), BlockObjectStoreError).startswith("unexpected")


def test_a_strict_store_is_caught_diverging(vllm: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    # The strict profile differs from vLLM on a capacity failure: the harness
    # must notice, or its green runs would mean nothing.
    import auxspec.drivers.upstream_agreement as agreement

    def strict(*, max_bytes: int, object_nbytes: int, profile: str) -> ReferenceStore:
        return ReferenceStore(max_bytes=max_bytes, object_nbytes=object_nbytes, profile="strict")

    monkeypatch.setattr(agreement, "ReferenceStore", strict)
    # Capacity failure: "a" is pinned and "b", "c" are protected; upstream
    # keeps the retain of "x", strict does not.
    program = upstream_trace(2, 1, (Put((("a", b"1"),), retain=("a",)), Put((("b", b"2"), ("c", b"3")), retain=("x",))))
    with pytest.raises(DivergenceFound, match=r"step 1"):
        run_agreement(vllm, program)


def test_observe_vllm_does_not_touch_recency(vllm: ModuleType) -> None:
    store = vllm.BlockObjectStore(max_bytes=4, object_nbytes=2)
    store.put([vllm.BlockObject("a", b"aa"), vllm.BlockObject("b", b"bb")], retain_keys=["b", "b"])
    first = observe_vllm(store)
    assert first.entries == (("a", b"aa"), ("b", b"bb"))
    assert first.references == (("b", 2),)
    assert observe_vllm(store) == first  # observing twice changes nothing
    store.get_concatenated(["a"])
    assert [k for k, _ in observe_vllm(store).entries] == ["b", "a"]
    store.close()
    assert observe_vllm(store) == ((), (), True)


def test_generated_programs_reach_each_failure() -> None:
    # The strategy must produce every failure class, or the random test is weak.
    wanted = {
        ("Put", "BlockObjectStoreError"),  # capacity failure
        ("Put", "KeyError"),  # over-release
        ("Get", "BlockObjectStoreError"),  # missing key
        ("Get", "RuntimeError"),  # read after close
        ("Put", "RuntimeError"),  # put after close
        ("Get", "returned"),
        ("Put", "returned"),
    }
    seen: set[tuple[str, str]] = set()

    @settings(max_examples=300, database=None, deadline=None)
    @given(program=programs())
    def collect(program: Trace) -> None:
        for op, (what, detail) in zip(program.ops, reference_outcomes(program), strict=True):
            seen.add((type(op).__name__, str(detail) if what == "raised" else what))

    collect()
    assert wanted <= seen, f"never drawn: {sorted(wanted - seen)}"


# ----------------------------------------------------------- finding and loading


def test_upstream_path_honours_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module_file = tmp_path / "some_store.py"
    module_file.write_text("VALUE = 41 + 1\n", encoding="utf-8")
    monkeypatch.setenv(UPSTREAM_ENV, str(module_file))
    assert upstream_path() == module_file.resolve()
    loaded = load_upstream()
    assert loaded is not None and loaded.VALUE == 42
    assert load_upstream() is loaded  # loaded once: its classes stay the same objects


def test_a_wrong_environment_path_warns_and_counts_as_absent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(UPSTREAM_ENV, str(tmp_path / "missing.py"))
    with pytest.warns(UserWarning, match="missing.py"):
        assert upstream_path() is None
    with pytest.warns(UserWarning):
        assert load_upstream() is None


def test_load_module_registers_before_running(tmp_path: Path) -> None:
    # A dataclass needs its module in sys.modules while it is being created.
    source = tmp_path / "with_dataclass.py"
    source.write_text(
        "from __future__ import annotations\nfrom dataclasses import dataclass\n\n"
        "@dataclass(frozen=True)\nclass Point:\n    x: int\n",
        encoding="utf-8",
    )
    module = load_module_from_path(source)
    assert sys.modules[module.__name__] is module
    assert module.Point(3).x == 3


def test_load_module_errors_are_clear(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no Python file"):
        load_module_from_path(tmp_path / "absent.py")
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('cannot start')\n", encoding="utf-8")
    with pytest.raises(ImportError, match="cannot start") as info:
        load_module_from_path(broken, name="_auxspec_test_broken")
    assert isinstance(info.value.__cause__, RuntimeError)
    assert "_auxspec_test_broken" not in sys.modules  # a half-run module is not left behind
    not_python = tmp_path / "data.txt"
    not_python.write_text("x", encoding="utf-8")
    with pytest.raises(ImportError, match="cannot be loaded"):
        load_module_from_path(not_python)
