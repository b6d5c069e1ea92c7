"""Recency stamps for the depth ports: a stamp per key from a counter that
wraps at ``WRAP``, and eviction by the least stamp (a heap). ``RENUMBER``
on: the counter is at least twice as wide as the store's capacity needs,
and before it wraps every stored key is stamped again 1..n in recency
order (done right); off: the counter just wraps (the bug)."""

from __future__ import annotations

import heapq
from typing import Any

from _deep import DeepStore


class StampedStore(DeepStore):
    WRAP = 1 << 16
    RENUMBER = False

    def __init__(self, *, max_bytes: Any, object_nbytes: Any) -> None:
        super().__init__(max_bytes=max_bytes, object_nbytes=object_nbytes)
        self._clock = 0
        # Renumbering leaves n <= capacity stamps in use: the counter needs room above them.
        self._wrap = max(self.WRAP, 1 << (2 * self._cap).bit_length()) if self.RENUMBER else self.WRAP
        self._stamp: dict[str, int] = {}
        self._heap: list[tuple[int, str]] = []

    def _moved(self, key: str) -> None:
        if self.RENUMBER and self._clock == self._wrap - 1:
            self._renumber()
        self._clock = (self._clock + 1) % self._wrap
        self._stamp[key] = self._clock
        heapq.heappush(self._heap, (self._clock, key))
        if len(self._heap) > 2 * len(self._lru) + 64:
            self._heap = [(self._stamp[k], k) for k in self._lru if k in self._stamp]
            heapq.heapify(self._heap)

    def _renumber(self) -> None:
        """Every stored key stamped again in recency order, from 1 (the key
        being moved is stamped after, as the next)."""
        self._stamp = {key: number for number, key in enumerate(self._lru, 1) if key in self._stamp}
        self._heap = sorted((stamp, key) for key, stamp in self._stamp.items())
        self._clock = len(self._stamp)

    def _choose(self, victims: list[str], protected: set[str]) -> list[str]:
        chosen: list[str] = []
        taken: set[str] = set()
        kept: list[tuple[int, str]] = []
        while len(chosen) < len(victims) and self._heap:
            stamp, key = heapq.heappop(self._heap)
            if key not in self._lru or self._stamp.get(key) != stamp or key in taken:
                continue
            kept.append((stamp, key))
            if key in protected or key in self._refs:
                continue
            chosen.append(key)
            taken.add(key)
        for entry in kept:
            if entry[1] not in taken:
                heapq.heappush(self._heap, entry)
        for key in chosen:
            del self._stamp[key]
        return chosen

    def close(self) -> None:
        super().close()
        self._stamp.clear()
        self._heap.clear()
