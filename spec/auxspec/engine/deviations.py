"""The documented ways vLLM's module departs from the ``strict`` profile.

Each is a row of the design brief's profile table, shown with a minimal trace in
docs/deviations.md. ``auxspec verify --profile strict`` names a divergence by
the row it falls under, so a run on vLLM's module lists exactly these, and any
other divergence stands out as a real bug.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from auxspec.engine.calls import Reentry
from auxspec.engine.fields import Batch, Key, Keys
from auxspec.engine.observable import observed
from auxspec.engine.ops import REENTRANT_FORMS, REFUSED_PAYLOADS, UPSTREAM_PAYLOADS, Bad, KeyList, KeyValue, Op, Trace
from auxspec.engine.table import kind_of, step
from auxspec.models.sequential import Err, Kind, Ok, Outcome, State, UndefinedInput
from auxspec.reference.store import Snapshot, observe

DEVIATIONS: dict[str, str] = {
    "capacity-error-half-applied": "after a capacity error, counts, terminal moves and re-put moves stay applied",
    "over-release-half-applied": "a release with no reference raises a bare KeyError, with earlier pins applied",
    "bad-payload-accepted": "a payload of the wrong length or type corrupts the store instead of failing first",
    "non-str-key-accepted": "a key that is not a str is accepted (1 and True alias)",
    # Not rows of the design brief's table: the same strictness as for keys, applied
    # to the constructor's int sizes (vLLM takes True as 1), to the shape of
    # key lists and batches, and to reads given a one-pass iterator.
    "bool-size-accepted": "a bool store size is accepted as 0 or 1",
    "shape-not-checked": "a str given as a key list is taken as its characters; an object without key and payload "
    "raises AttributeError",
    "iterator-read-not-moved": "get_concatenated given a one-pass iterator reads its keys but does not move them",
    # semantics.md section 12, which vLLM's module has no guard for.
    "reentrant-call-accepted": "a call made from caller code (a key generator) while another call of the same "
    "store runs is let through instead of refused",
}


def _list_fault(keys: KeyList) -> str | None:
    if isinstance(keys, Bad):
        return "shape-not-checked"
    return "non-str-key-accepted" if any(not isinstance(k, str) for k in keys) else None


def _first_type_fault(op: Op) -> str | None:
    # In the order the model validates: each object's key then payload, then the key lists.
    for field in kind_of(op).fields:
        value = getattr(op, field.name)
        if isinstance(field.kind, Batch):
            if isinstance(value, Bad):
                return "shape-not-checked"
            for obj in value:
                if isinstance(obj, Bad):
                    return "shape-not-checked"
                key, payload = obj
                if not isinstance(key, str):
                    return "non-str-key-accepted"
                if payload is None or getattr(op, "payloads", "bytes") in REFUSED_PAYLOADS:
                    return "bad-payload-accepted"  # no payload, or one of a kind the spec refuses (a str)
        elif isinstance(field.kind, Keys):
            fault = _list_fault(value)
            if fault:
                return fault
    return None


def deviation(
    trace: Trace,
    index: int,
    want: Outcome | None,
    got: Outcome | None,
    got_snapshot: Snapshot | None,
    before: State | None,
) -> str | None:
    """The documented deviation a divergence at op ``index`` of a ``strict``
    ``trace`` is, exactly, or None: the spec expected ``want`` from the
    state ``before``; the target gave ``got`` (None: an exception of no kind)
    and, when it can be seen, ``got_snapshot``. Each deviation fixes the op,
    both outcomes and, where it says how the state changes, the state."""
    if index < 0:  # building the store
        sizes = (trace.max_bytes, trace.object_nbytes)
        accepted = want == Err(Kind.TYPE) and got == Ok() and any(isinstance(size, bool) for size in sizes)
        return "bool-size-accepted" if accepted else None
    op = trace.ops[index]
    if getattr(op, "form", "list") in REENTRANT_FORMS and got is None and Reentry.unrefused.get(id(op)) is op:
        # The call's caller code made a call on the same store that returned
        # (engine.calls.Reentry reports it as an exception of no kind, and
        # records the op: another exception of no kind is not this).
        return "reentrant-call-accepted"
    if kind_of(op).name == "put" and getattr(op, "payloads", "bytes") not in UPSTREAM_PAYLOADS:
        # A payload of a kind vLLM does not take (a str, a non-contiguous view): the profile table's
        # "payload of the wrong type" row, whatever vLLM then does with it.
        return "bad-payload-accepted"
    if not isinstance(want, Err):
        return "iterator-read-not-moved" if _read_but_not_moved(op, want, got, got_snapshot, before) else None
    if want.kind in (Kind.PAYLOAD, Kind.TYPE):
        fault = "bad-payload-accepted" if want.kind is Kind.PAYLOAD else _first_type_fault(op)
        if fault == "non-str-key-accepted" and before is not None:
            # vLLM takes the key as a key: the outcome is upstream's for a str in
            # its place (unless the op holds a shape or payload vLLM does not
            # check either, where upstream says nothing).
            upstream = _with_str_keys(before, op)
            return fault if upstream is None or got == upstream else None
        # A shape vLLM does not check, or a payload it does not: whatever
        # iterating or storing it does, the spec's refusal is the deviation.
        return fault
    if want.kind in _HALF_APPLIED and got == want and before is not None:
        # vLLM fails as the spec does, with part of the call applied: the state
        # the upstream profile gives, with the order of the keys pinned before
        # the call left out (under strict it was never compared, so an earlier
        # half-applied move of pinned keys alone may have left them otherwise,
        # and this call may unpin them without a terminal move).
        vllm_state = step(replace(before, profile="upstream"), op)[0]
        pinned = {key for key, _ in before.refs}
        if got_snapshot is None or _unordered(got_snapshot, pinned) == _unordered(observe(vllm_state), pinned):
            return _HALF_APPLIED[want.kind]
    return None


def _unordered(snapshot: Snapshot, keys: set[str]) -> tuple[object, ...]:
    """``snapshot``'s observable form, with ``keys`` stored as a set."""
    stored, _, counts, closed = observed(snapshot, exact_order=True)  # exact: every stored key, in order
    ordered = tuple(entry for entry in stored if entry[0] not in keys)
    return ordered, tuple(sorted(entry for entry in stored if entry[0] in keys)), counts, closed


def _with_str_keys(before: State, op: Op) -> Outcome | None:
    """Upstream's outcome for ``op`` with each non-str key replaced by a str
    of its own (vLLM aliases 1 and True), or None when upstream leaves the
    rest of the op undefined."""

    def key(value: KeyValue) -> KeyValue:
        return value if isinstance(value, str) else f"\x00{int(value)}"

    def keys(value: Any) -> Any:
        return value if isinstance(value, Bad) else tuple(map(key, value))

    def batch(value: Any) -> Any:
        if isinstance(value, Bad):
            return value
        return tuple(obj if isinstance(obj, Bad) else (key(obj[0]), obj[1]) for obj in value)

    mapped = {Key: key, Keys: keys, Batch: batch}
    changes = {
        f.name: mapped[type(f.kind)](getattr(op, f.name)) for f in kind_of(op).fields if type(f.kind) in mapped
    }
    try:
        return step(replace(before, profile="upstream"), replace(op, **changes))[1]
    except UndefinedInput:
        return None


_HALF_APPLIED = {Kind.CAPACITY: "capacity-error-half-applied", Kind.UNREFERENCED: "over-release-half-applied"}


def _read_but_not_moved(
    op: Op, want: Outcome | None, got: Outcome | None, got_snapshot: Snapshot | None, before: State | None
) -> bool:
    """A read of a one-pass iterator (vLLM reads its key list twice) that
    returns the right bytes and leaves the store as it was."""
    one_pass = getattr(op, "form", "list") == "iter" and not kind_of(op).one_pass_upstream
    if not (one_pass and got == want and got_snapshot is not None and before is not None):
        return False
    return observed(got_snapshot, exact_order=True) == observed(observe(before), exact_order=True)
