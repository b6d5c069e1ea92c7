"""What the spec expects of a trace: the model run over it."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from auxspec.engine import budget
from auxspec.engine.fields import model_items, model_keys
from auxspec.engine.ops import Op, Put, Trace
from auxspec.engine.table import kind_of, step
from auxspec.models import background as bg
from auxspec.models import sequential as model
from auxspec.models.background import OwnerCall
from auxspec.models.sequential import Err, Ok, Outcome
from auxspec.reference import binding
from auxspec.reference.store import Snapshot, observe


def initial_state(trace: Trace, semantics: Any = model) -> model.State | Err:
    """The model state ``trace`` starts from, or why it cannot be built
    (``semantics``: the model, or a checked stand-in)."""
    result: model.State | Err = semantics.new(
        binding.as_size(trace.max_bytes), binding.as_size(trace.object_nbytes), trace.profile
    )
    return result


def expected_new(trace: Trace) -> Outcome:
    """The spec's outcome for building the store ``trace`` starts from."""
    built = initial_state(trace)
    return built if isinstance(built, Err) else Ok()


def spec_steps(
    trace: Trace, start: model.State, every: int = 1, ops: Iterable[Op] | None = None, semantics: Any = model
) -> Iterator[tuple[Op, model.State, model.State, Outcome]]:
    """The spec's walk through ``trace`` from ``start``: per op, the op, the
    state before, the state after and the outcome. A broken model invariant
    is an ``AssertionError``: the model itself is wrong, and no target can be
    judged by it. The invariant is checked after every op (``every=1``), or
    after every ``every``-th op and the last one (the fuzzers' cheap mode,
    which replays with ``every=1`` to name the op that broke it).

    ``ops``: the ops to walk instead of ``trace.ops``, consumed one at a time
    (a vector file streamed, ``every=1`` only: the last op is not known ahead).
    ``semantics``: the model, or a checked stand-in (``models.incremental``,
    whose state changes in place, so ``before`` is the same object as ``after``)."""
    assert ops is None or every == 1
    state = start
    last = len(trace.ops) - 1
    for index, op in enumerate(trace.ops if ops is None else ops):
        budget.check_every(index)  # a shrink candidate keeps the search's deadline inside itself
        after, outcome = step(state, op, semantics)
        if every == 1 or index == last or index % every == every - 1:
            broken = model.violations(after)
            if broken:
                raise AssertionError(f"model invariant broken after {op}: {'; '.join(broken)}")
        yield op, state, after, outcome
        state = after


def expected_outcomes(trace: Trace) -> Iterator[tuple[Outcome, Snapshot]]:
    """The spec's outcome and snapshot for each op of ``trace``, in order
    (nothing when the store cannot be built).

    The model's steps run on the state directly: the same semantics as
    driving a ``ReferenceStore`` (tests/test_traces_and_verify.py checks the
    two agree) without raising and classifying an exception per failure,
    which is most of a fuzzer's time.
    """
    built = initial_state(trace)
    if isinstance(built, Err):
        return
    for _, _, after, outcome in spec_steps(trace, built):
        yield outcome, observe(after)


# ------------------------------------------------------------ background


def background_batch(op: Put) -> bg.Batch:
    """The batch a put queues, as the background model holds it."""
    return bg.Batch(model_items(op.objects, op.payloads), model_keys(op.retain), model_keys(op.release))


def background_step(state: bg.BgState, op: Op) -> tuple[bg.BgState, bg.BgOutcome]:
    """The background model's step for an owner call other than put, when
    the writer makes no progress during the call but what it must."""
    row = kind_of(op)
    if row.owner is OwnerCall.CLOSE:
        return bg.close(state)
    if row.owner is OwnerCall.ENTER:
        return bg.enter(state)
    return bg.after_wait(state, lambda inner: row.step(model, inner, op))
