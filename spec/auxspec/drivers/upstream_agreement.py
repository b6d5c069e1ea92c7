"""Agreement of the ``upstream`` profile with vLLM's own module.

The ``upstream`` profile claims to be what vLLM does on every valid input,
failures included. This module makes that claim checkable: a program (a trace
of the one op alphabet, ``auxspec.engine.ops``: ``Put`` / ``Get`` / ``Close``), a
Hypothesis strategy that draws
valid programs the way they stress the store (few keys, tiny capacities, many
pins, refcounts going 0 -> 1 -> 0, over-releases, capacity failures, calls
after close), and :func:`run_agreement`, which plays a program on
``ReferenceStore(profile="upstream")`` and on vLLM's ``BlockObjectStore`` side
by side and raises :class:`~auxspec.engine.compare.DivergenceFound` at the first step where a return value,
an exception class or the observable state differs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import partial
from types import ModuleType
from typing import Any

from hypothesis import strategies as st

from auxspec.engine.compare import DivergenceFound
from auxspec.engine.ops import Close, Get, Op, Put, Trace
from auxspec.engine.table import describe, invoke
from auxspec.engine.target import observe_vllm
from auxspec.models import sequential as model
from auxspec.models.sequential import State
from auxspec.reference.store import ReferenceStore
from auxspec.reference.store import Snapshot as StoreSnapshot
from auxstore import BlockObjectStoreError


def upstream_trace(max_bytes: int, object_nbytes: int, ops: tuple[Op, ...]) -> Trace:
    """A trace of the ``upstream`` profile: the one op alphabet, ``auxspec.engine.ops``."""
    return Trace("upstream", max_bytes, object_nbytes, ops)


def show(trace: Trace) -> str:
    lines = [f"store(max_bytes={trace.max_bytes}, object_nbytes={trace.object_nbytes})"]
    lines += [f"  {i}: {describe(op)}" for i, op in enumerate(trace.ops)]
    return "\n".join(lines)


# What a call did, comparable across the two stores: ("returned", value) or
# ("raised", class label).
Observed = tuple[str, object]


def error_label(error: BaseException, store_error: type[BaseException]) -> str:
    """The class of ``error`` as the protocol names it.

    Exact classes, not ``isinstance``: the ``upstream`` profile must raise
    exactly vLLM's classes (the store error base, a bare ``KeyError``), so a
    subclass on either side is a disagreement worth seeing.
    """
    if type(error) is store_error:
        return "BlockObjectStoreError"
    if type(error) in (KeyError, RuntimeError, ValueError, TypeError):
        return type(error).__name__
    return f"unexpected {type(error).__module__}.{type(error).__qualname__}: {error}"


def _call(fn: Callable[[], object], store_error: type[BaseException]) -> Observed:
    try:
        return ("returned", fn())
    except Exception as error:  # every exception is an outcome to compare
        return ("raised", error_label(error, store_error))


def construct_both(module: ModuleType, max_bytes: int, object_nbytes: int) -> tuple[Observed, Observed]:
    """What constructing each store did: ``("returned", (capacity, object_nbytes))`` or the error."""
    reference = _call(
        lambda: _shape(ReferenceStore(max_bytes=max_bytes, object_nbytes=object_nbytes, profile="upstream")),
        BlockObjectStoreError,
    )
    vllm = _call(
        lambda: _vllm_shape(module.BlockObjectStore(max_bytes=max_bytes, object_nbytes=object_nbytes)),
        module.BlockObjectStoreError,
    )
    return reference, vllm


def _shape(store: ReferenceStore) -> tuple[int, int]:
    return (store.capacity, store.object_nbytes)


def _vllm_shape(store: Any) -> tuple[int, int]:
    shape = (int(store.num_slots), int(store.object_nbytes))
    store.close()  # release the mmap now rather than at garbage collection
    return shape


def run_agreement(module: ModuleType, program: Trace) -> int:
    """Play ``program`` on both stores; raise :class:`~auxspec.engine.compare.DivergenceFound` at the first
    difference. Returns the number of steps compared."""
    reference = _reference(program)
    vllm = module.BlockObjectStore(max_bytes=program.max_bytes, object_nbytes=program.object_nbytes)
    try:
        _compare_state(program, -1, reference.snapshot(), observe_vllm(vllm))
        for index, op in enumerate(program.ops):
            expected = _call(partial(invoke, reference, op), BlockObjectStoreError)
            actual = _call(partial(invoke, vllm, op), module.BlockObjectStoreError)
            if expected != actual:
                raise DivergenceFound(_report(program, index, f"reference {expected}, vLLM {actual}"))
            _compare_state(program, index, reference.snapshot(), observe_vllm(vllm))
    finally:
        vllm.close()
    return len(program.ops)


def _reference(program: Trace) -> ReferenceStore:
    max_bytes, object_nbytes = program.max_bytes, program.object_nbytes
    assert isinstance(max_bytes, int) and isinstance(object_nbytes, int)  # upstream programs use int sizes
    return ReferenceStore(max_bytes=max_bytes, object_nbytes=object_nbytes, profile="upstream")


def reference_outcomes(program: Trace) -> list[Observed]:
    """What each step of ``program`` does on ``ReferenceStore(profile="upstream")`` alone."""
    store = _reference(program)
    return [_call(partial(invoke, store, op), BlockObjectStoreError) for op in program.ops]


# Upstream programs hold str keys, bytes payloads and plain lists only (the
# rest is undefined there).


def _compare_state(program: Trace, index: int, expected: StoreSnapshot, actual: StoreSnapshot) -> None:
    if expected != actual:
        raise DivergenceFound(_report(program, index, f"state: reference {expected}, vLLM {actual}"))


def _report(trace: Trace, index: int, what: str) -> str:
    shown = replace(trace, ops=trace.ops[: index + 1])
    where = "after construction" if index < 0 else f"at step {index}"
    return f"upstream profile and vLLM disagree {where}: {what}\n{show(shown)}"


# ------------------------------------------------------------------ generation

MAX_KEYS = 8


def _pick_key(draw: st.DrawFn, used: list[str]) -> str:
    """A key already used, or (the last choice, so shrinking avoids it) a new one."""
    limit = len(used) if len(used) < MAX_KEYS else len(used) - 1
    index = draw(st.integers(0, limit))
    if index == len(used):
        used.append(f"k{index}")
    return used[index]


def _pick_from(draw: st.DrawFn, preferred: list[str], used: list[str]) -> str:
    """Mostly one of ``preferred`` (when there is one), sometimes any key."""
    if preferred and draw(st.integers(0, 4)) > 0:
        return draw(st.sampled_from(preferred))
    return _pick_key(draw, used)


def _draw_put(draw: st.DrawFn, state: State, used: list[str]) -> tuple[State, Put]:
    size = state.object_nbytes
    objects: tuple[tuple[str, bytes], ...] = tuple(
        (_pick_key(draw, used), draw(st.binary(min_size=size, max_size=size))) for _ in range(draw(st.integers(0, 4)))
    )
    retain = tuple(_pick_key(draw, used) for _ in range(draw(st.integers(0, 3))))
    # Releases mostly name a key that still holds a reference at that point of
    # the call (so counts go down to zero and terminal keys happen); sometimes
    # any key, which over-releases when it has none left.
    running = model.references(state)
    for key in retain:
        running[key] = running.get(key, 0) + 1
    release: list[str] = []
    for _ in range(draw(st.integers(0, 3))):
        key = _pick_from(draw, sorted(k for k, n in running.items() if n > 0), used)
        running[key] = running.get(key, 0) - 1
        release.append(key)
    state, _ = model.put(state, objects, retain, tuple(release))
    return state, Put(objects, retain, tuple(release))


@st.composite
def programs(draw: st.DrawFn, max_ops: int = 20) -> Trace:
    """Valid programs for the ``upstream`` profile (every input vLLM defines)."""
    object_nbytes = draw(st.integers(1, 3))
    capacity = draw(st.integers(1, 5))
    max_bytes = capacity * object_nbytes + draw(st.integers(0, object_nbytes - 1))
    created = model.new(max_bytes, object_nbytes, "upstream")
    assert isinstance(created, State)
    state = created
    used: list[str] = []
    ops: list[Op] = []
    for _ in range(draw(st.integers(1, max_ops))):
        choice = draw(st.integers(0, 19))
        op: Op
        if choice < 12:
            state, op = _draw_put(draw, state, used)
        elif choice < 19:
            stored = list(model.stored_keys(state))
            keys = tuple(_pick_from(draw, stored, used) for _ in range(draw(st.integers(0, 4))))
            state, _ = model.get_concatenated(state, keys)
            op = Get(keys)
        else:
            op = Close()
            state, _ = model.close(state)
        ops.append(op)
    return upstream_trace(max_bytes, object_nbytes, tuple(ops))


__all__ = [
    "DivergenceFound",
    "construct_both",
    "error_label",
    "programs",
    "reference_outcomes",
    "run_agreement",
    "show",
    "upstream_trace",
]
