"""Value types shared by the store, the background writer and the spec."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple


@dataclass(frozen=True)
class BlockObject:
    """One immutable auxiliary-output object: ``payload`` stored under ``key``."""

    key: str
    payload: bytes


@dataclass(frozen=True)
class StoreStats:
    """Counters of a store; reading them never changes recency.

    ``pinned`` counts stored keys with at least one reference. ``hits`` counts
    keys served by successful reads (a repeated key counts each time);
    ``misses`` counts reads that failed on a key that is not stored;
    ``evictions`` counts keys evicted; ``capacity_failures`` counts puts that
    failed for lack of evictable room.
    """

    stored: int
    capacity: int
    pinned: int
    hits: int
    misses: int
    evictions: int
    capacity_failures: int


class StoreSnapshot(NamedTuple):
    """Everything observable about a store, taken without touching recency.

    ``entries`` are ``(key, payload)`` pairs. auxstore's stores list the
    observable form (``auxspec.engine.observable``): the unpinned keys least
    recent first, then the pinned keys sorted by key, since no sequence of
    calls can tell the pinned keys' relative order (a pinned key is evicted
    only after its count reaches zero, which makes it most recent). The
    spec's reference model lists every key least recent first.
    ``references`` are ``(key, count)`` pairs sorted by key. A closed store's
    snapshot is empty with ``closed`` set.
    """

    entries: tuple[tuple[str, bytes], ...]
    references: tuple[tuple[str, int], ...]
    closed: bool
