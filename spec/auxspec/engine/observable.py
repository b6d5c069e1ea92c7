"""What of a store's state a continuation of calls can observe."""

from __future__ import annotations

from typing import Any

from auxspec.engine.calls import OddReturn, as_bytes, as_count
from auxspec.reference.store import Snapshot

Observable = tuple[tuple[tuple[str, bytes], ...], tuple[tuple[str, bytes], ...], tuple[tuple[str, int], ...], bool]


def observed(snapshot: Snapshot, exact_order: bool = False) -> Observable:
    """What a continuation of calls can tell about a store in ``snapshot``.

    Under ``strict``: the stored keys without a reference, in recency order
    (eviction takes them in that order); the stored keys with a reference, as
    a set (sorted): their order is never observable, since a pinned key can be
    evicted only after its count reaches zero, which moves it to the most-recent
    end (and a failed strict put changes nothing); the counts; whether it is
    closed. Slot numbers are not part of a snapshot at all.

    ``exact_order`` keeps the pinned keys' order too. Under ``upstream`` it is
    observable, so the caller asks for it: an over-release raises after the
    releases before it are applied, so a count can reach zero with no terminal
    move, and the key is then evicted from where it stood while pinned.
    tests/test_canonical.py shows both: under ``strict``, states with the same
    form give the same outcome for every next op and stay alike; under
    ``upstream``, a reordering of pinned keys that a call tells apart.
    """
    entries, references, closed = snapshot  # any sequence of three a port returns
    counts = tuple(sorted((str(key), int(count)) for key, count in references))
    pinned = {key for key, _ in counts}
    stored = tuple((str(key), bytes(payload)) for key, payload in entries)
    if exact_order:
        return stored, (), counts, bool(closed)
    free = tuple(entry for entry in stored if entry[0] not in pinned)
    held = tuple(sorted(entry for entry in stored if entry[0] in pinned))
    return free, held, counts, bool(closed)


def canonical(snapshot: Snapshot) -> Snapshot:
    """``snapshot`` in the strict profile's observable form, as a snapshot:
    the stored keys without a reference in recency order, then those with one
    sorted by key, and the counts sorted by key. Two strict states are alike
    exactly when their canonical snapshots are equal; it is what auxstore's
    own stores report (``snapshot()`` shows only the observable form)."""
    free, held, counts, closed = observed(snapshot)
    return Snapshot(entries=free + held, references=counts, closed=closed)


def as_snapshot(value: object) -> Snapshot:
    """What a target's ``snapshot()`` returned, as a ``Snapshot``: any
    sequence of three (entries, references, closed), each entry a ``(key,
    payload)`` pair with a bytes-like payload and each reference a ``(key,
    count)`` pair with an int count; anything else is an ``OddReturn``
    naming what was wrong."""
    if type(value) is Snapshot:  # the spec's own type (auxstore's store returns it): already checked
        return value
    given: Any = value
    try:
        entries, references, closed = given
        stored = tuple((key, as_bytes("snapshot() entry", payload)) for key, payload in entries)
        counts = tuple((key, as_count("snapshot() reference count", count)) for key, count in references)
    except OddReturn:
        raise
    except (TypeError, ValueError):
        shown = repr(value)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        raise OddReturn(
            f"snapshot() returned {type(value).__name__} {shown}, not (entries, references, closed) "
            "with (key, payload) entries and (key, count) references"
        ) from None
    return Snapshot(entries=stored, references=counts, closed=bool(closed))
