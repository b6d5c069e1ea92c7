"""A cached count of pinned stored keys for the depth ports (``stats().pinned``
and the capacity check read it instead of counting): kept on every path
(counts applied, keys stored pinned, close; evicted keys are never pinned). ``BULK_SKIP`` (a count-change
size above which the bulk path forgets the keys that reach zero) plants
the bug; None keeps it right."""

from __future__ import annotations

from typing import Any

from _deep import NEW, DeepStore

from auxstore import StoreStats


class CachedPinsStore(DeepStore):
    BULK_SKIP: int | None = None

    def __init__(self, *, max_bytes: Any, object_nbytes: Any) -> None:
        super().__init__(max_bytes=max_bytes, object_nbytes=object_nbytes)
        self._pinned = 0

    def _apply_counts(self, changed: dict[str, int]) -> None:
        bulk = self.BULK_SKIP is not None and len(changed) > self.BULK_SKIP
        for key, count in changed.items():
            was = key in self._refs
            if key in self._lru and was != bool(count) and not (bulk and not count):
                self._pinned += 1 if count else -1
        super()._apply_counts(changed)

    def _moved(self, key: str) -> None:
        if self._lru.get(key) == NEW and key in self._refs:  # a new key stored pinned
            self._pinned += 1

    def close(self) -> None:
        super().close()
        self._pinned = 0

    def stats(self) -> StoreStats:
        self._check_open()
        hits, misses, evictions, failures = self._stats_of()
        return StoreStats(len(self._lru), self._cap, self._pinned, hits, misses, evictions, failures)
