"""The documented ways vLLM's module departs from the ``strict`` profile.

Each is a row of DESIGN.md's profile table, shown with a minimal trace in
docs/deviations.md. ``auxspec verify --profile strict`` names a divergence by
the row it falls under, so a run on vLLM's module lists exactly these, and any
other divergence stands out as a real bug.
"""

from __future__ import annotations

from auxspec.model import Err, Kind, Outcome
from auxspec.ops import Bad, Get, KeyList, Op, Put, ReadInto

DEVIATIONS: dict[str, str] = {
    "capacity-error-half-applied": "after a capacity error, counts, terminal moves and re-put moves stay applied",
    "over-release-half-applied": "a release with no reference raises a bare KeyError, with earlier pins applied",
    "bad-payload-accepted": "a payload of the wrong length or type corrupts the store instead of failing first",
    "non-str-key-accepted": "a key that is not a str is accepted (1 and True alias)",
    # Not rows of DESIGN.md's table: the same strictness as for keys, applied
    # to the constructor's int sizes (vLLM takes True as 1), to the shape of
    # key lists and batches, and to reads given a one-pass iterator.
    "bool-size-accepted": "a bool store size is accepted as 0 or 1",
    "shape-not-checked": "a str given as a key list is taken as its characters; an object without key and payload "
    "raises AttributeError",
    "iterator-read-not-moved": "get_concatenated given a one-pass iterator reads its keys but does not move them",
}


def _list_fault(keys: KeyList) -> str | None:
    if isinstance(keys, Bad):
        return "shape-not-checked"
    return "non-str-key-accepted" if any(not isinstance(k, str) for k in keys) else None


def _first_type_fault(op: Op) -> str | None:
    # In the order the model validates: each object's key then payload, then pins.
    if isinstance(op, Put):
        if isinstance(op.objects, Bad):
            return "shape-not-checked"
        for obj in op.objects:
            if isinstance(obj, Bad):
                return "shape-not-checked"
            key, payload = obj
            if not isinstance(key, str):
                return "non-str-key-accepted"
            if payload is None:
                return "bad-payload-accepted"
        return _list_fault(op.retain) or _list_fault(op.release)
    if isinstance(op, (Get, ReadInto)):
        return _list_fault(op.keys)
    return None


def deviation(op: Op | None, expected: Outcome | None) -> str | None:
    """The documented deviation a divergence on ``op`` (where the spec expected
    ``expected``) falls under, or None when it is none of them."""
    if isinstance(op, (Get, ReadInto)) and op.form == "iter" and not isinstance(expected, Err):
        return "iterator-read-not-moved"
    if not isinstance(expected, Err):
        return None
    if op is None:  # building the store
        return "bool-size-accepted" if expected.kind is Kind.TYPE else None
    if expected.kind is Kind.PAYLOAD:
        return "bad-payload-accepted"
    if expected.kind is Kind.TYPE:
        return _first_type_fault(op)
    if expected.kind is Kind.CAPACITY:
        return "capacity-error-half-applied"
    if expected.kind is Kind.UNREFERENCED:
        return "over-release-half-applied"
    return None
