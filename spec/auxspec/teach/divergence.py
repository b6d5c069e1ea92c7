"""A timeline run on a target too: expected and actual, field by field.

The comparison is the one ``auxspec verify`` makes (outcome, then the
observable state when the target can be observed), done step by step so
each field can be shown side by side up to the first difference.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from typing import Any

from auxspec.engine.compare import apply, construct
from auxspec.engine.observable import as_snapshot
from auxspec.engine.ops import Trace
from auxspec.engine.target import Target
from auxspec.models.sequential import Outcome, State
from auxspec.reference.store import Snapshot as StoreSnapshot
from auxspec.teach.timeline import Field, Step, Timeline, outcome_text, short_bytes

FIELDS = ("outcome", "recency (least → most)", "payloads", "pins", "closed")


def _exception(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}"
    return text if len(text) <= 120 else text[:117] + "..."


def _first_byte_apart(a: bytes, b: bytes) -> str:
    index = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    return f" (first differs at byte {index})"


def _outcome(want: Outcome, got: Outcome | str) -> Field:
    if isinstance(got, str):
        return Field(FIELDS[0], outcome_text(want), got)
    expected, actual = outcome_text(want), outcome_text(got)
    if want != got and expected == actual:  # the short forms hide the difference
        a, b = getattr(want, "value", None), getattr(got, "value", None)
        actual += _first_byte_apart(a, b) if isinstance(a, bytes) and isinstance(b, bytes) else f" ({got!r})"
    return Field(FIELDS[0], expected, actual)


def _state_fields(want: State, got: StoreSnapshot, exact: bool) -> list[Field]:
    def order(entries: tuple[tuple[str, bytes], ...], refs: tuple[tuple[str, int], ...]) -> str:
        if exact:
            return " ".join(key for key, _ in entries) or "(empty)"
        # As verify compares it (auxspec.engine.observable): the pinned keys'
        # relative order is not observable, so they are shown sorted, apart.
        pinned = {key for key, _ in refs}
        free = " ".join(key for key, _ in entries if key not in pinned) or "(empty)"
        held = sorted(key for key, _ in entries if key in pinned)
        return free + (f"; pinned: {' '.join(held)}" if held else "")

    def payloads(entries: tuple[tuple[str, bytes], ...]) -> str:
        # By key, so a difference in order alone shows in the recency field only.
        return ", ".join(f"{key}={short_bytes(payload)}" for key, payload in sorted(entries)) or "(none)"

    def pins(refs: tuple[tuple[str, int], ...]) -> str:
        return ", ".join(f"{key}={count}" for key, count in refs) or "(none)"

    fields = [
        Field(FIELDS[1], order(want.entries, want.refs), order(got.entries, tuple(got.references))),
        Field(FIELDS[2], payloads(want.entries), payloads(got.entries)),
        Field(FIELDS[3], pins(want.refs), pins(tuple(got.references))),
        Field(FIELDS[4], str(want.closed), str(got.closed)),
    ]
    if want.entries != tuple(got.entries) and fields[1].expected == fields[1].actual and not fields[2].differs:
        # Same keys, same short payloads: say which payload differs.
        for (key, a), (_, b) in zip(sorted(want.entries), sorted(got.entries), strict=False):
            if a != b:
                fields[2] = Field(
                    FIELDS[2], fields[2].expected, fields[2].actual + f"; {key}" + _first_byte_apart(a, b)
                )
                break
    return fields


def against(line: Timeline, trace: Trace, target: Target) -> Timeline:
    """``line`` (the spec's timeline of ``trace``) with ``target``'s side added
    to each step up to the first difference."""
    labelled = replace(line, target=target.label)
    try:
        store, got_new = construct(target.factory, trace, target.errors)
    except Exception as error:
        field = Field("constructor", outcome_text(line.built), f"raised {_exception(error)}")
        return replace(labelled, constructor=(field,), diverges_at=0)
    field = Field("constructor", outcome_text(line.built), outcome_text(got_new))
    if field.differs:
        return replace(labelled, constructor=(field,), diverges_at=0)
    if store is None:
        return labelled
    steps: list[Step] = []
    diverges: int | None = None
    try:
        for step in line.steps:
            if diverges is not None or step.outcome is None or step.state is None:
                steps.append(step)
                continue
            fields = _run(store, step, target, target.exact_order or trace.profile != "strict")
            steps.append(replace(step, actual=tuple(fields)))
            if any(f.differs for f in fields):
                diverges = step.number
    finally:
        with contextlib.suppress(Exception):
            store.close()
    return replace(labelled, steps=tuple(steps), diverges_at=diverges)


def _run(store: Any, step: Step, target: Target, exact: bool) -> list[Field]:
    assert step.outcome is not None and step.state is not None
    got: Outcome | str
    try:
        got = apply(store, step.op, target.errors)
    except Exception as error:
        got = f"unexpected {_exception(error)}"
    fields = [_outcome(step.outcome, got)]
    if target.observe is not None:
        try:
            seen = target.observe(store)
            snapshot = None if seen is None else as_snapshot(seen)
        except Exception as error:
            fields.append(Field("state", "readable", f"snapshot failed: {_exception(error)}"))
        else:
            if snapshot is not None:
                fields.extend(_state_fields(step.state, snapshot, exact))
    return fields
