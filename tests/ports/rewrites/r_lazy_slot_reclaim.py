"""The plain store with lazy reclamation: an evicted key's slot is only
marked dead, and dead slots are swept into the free list when the arena has
no fresh slot left, so the arena fills up before any slot is reused.

Snapshot vs spec: identical (slot layout differs, not shown).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "subtle"))

from _plain import PlainStore

PROFILE = "strict"
DRIVE = "python"
SNAPSHOT = "identical (slot layout differs, not shown)"


class BlockObjectStore(PlainStore):
    def __init__(self, *, max_bytes: object, object_nbytes: object) -> None:
        super().__init__(max_bytes=max_bytes, object_nbytes=object_nbytes)
        self._dead: list[int] = []

    def _release_slot(self, slot: int) -> None:
        self._dead.append(slot)

    def _alloc(self) -> int:
        if self._next_slot < self._cap:
            self._next_slot += 1
            return self._next_slot - 1
        if not self._free:
            self._free, self._dead = self._dead[::-1], []
        return self._free.pop()
