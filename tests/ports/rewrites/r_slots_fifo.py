"""The plain store with freed slots reused first-in first-out instead of
last-in first-out: a different slot layout, the same store.

Snapshot vs spec: identical (slot numbers are not in a snapshot).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "subtle"))

from collections import deque

from _plain import PlainStore

PROFILE = "strict"
DRIVE = "python"
SNAPSHOT = "identical (slot layout differs, not shown)"


class BlockObjectStore(PlainStore):
    def __init__(self, *, max_bytes: object, object_nbytes: object) -> None:
        super().__init__(max_bytes=max_bytes, object_nbytes=object_nbytes)
        self._fifo: deque[int] = deque()

    def _release_slot(self, slot: int) -> None:
        self._fifo.append(slot)

    def _alloc(self) -> int:
        if self._fifo:
            return self._fifo.popleft()
        slot = self._next_slot
        self._next_slot += 1
        return slot
