"""Freed slots go through a ring buffer of 16 entries, but the push side
wraps at 15 (a typo for the ring size): from the 16th freed slot on, a pop
returns a stale slot number that another key still uses, so two keys share a
slot and a read returns the other key's payload.

Dimension: long histories (needs 16 evictions that free slots).
Exposed by: store(max_bytes=2, object_nbytes=1); put x0..x17 one per put
(payload i); get [x17, x16] (spec: 11 10; port: a shared slot).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _plain import PlainStore

DIMENSION = "long histories"
PROFILE = "strict"
DRIVE = "python"


class BlockObjectStore(PlainStore):
    def __init__(self, *, max_bytes: object, object_nbytes: object) -> None:
        super().__init__(max_bytes=max_bytes, object_nbytes=object_nbytes)
        self._ring = [0] * 16
        self._head = self._tail = 0

    def _release_slot(self, slot: int) -> None:
        self._ring[self._tail % 15] = slot
        self._tail += 1

    def _alloc(self) -> int:
        if self._head < self._tail:
            slot = self._ring[self._head % 16]
            self._head += 1
            return slot
        slot = self._next_slot
        self._next_slot += 1
        return slot


SCENARIO = [("new", 2, 1)] + [("put", [(f"x{i}", bytes([i]))]) for i in range(18)] + [("get", ["x17", "x16"])]
