"""Each stored key is tagged with the number of the put that last placed
it, and eviction skips keys tagged with the current put number or later
(the batch being put): the numbers are 16 bits, so after 65,536 puts the
current number is small and every key tagged before the wrap looks
protected; a put evicts a later key than the least recent one.

Family: counters that wrap (put numbers). Depth: 65,536 puts.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _deep import DeepStore

DIMENSION = "puts (put numbers, 16 bits)"
PROFILE = "strict"
DRIVE = "python"


class BlockObjectStore(DeepStore):
    MASK = 0xFFFF

    def __init__(self, *, max_bytes: Any, object_nbytes: Any) -> None:
        super().__init__(max_bytes=max_bytes, object_nbytes=object_nbytes)
        self._number = 0
        self._tag: dict[str, int] = {}
        self._placing: set[str] = set()

    def put(self, objects: Any, *, retain_keys: Any = (), release_keys: Any = ()) -> None:
        self._number = (self._number + 1) & self.MASK
        super().put(objects, retain_keys=retain_keys, release_keys=release_keys)

    def _moved(self, key: str) -> None:
        if self._running == "put" and key not in self._placing:
            self._tag[key] = self._number

    def _moved_terminal(self, terminal: list[str]) -> None:
        self._placing = set(terminal)  # terminal moves are not placements, and end the batch's protection
        try:
            super()._moved_terminal(terminal)
        finally:
            self._placing = set()
        for key in terminal:
            if self._tag.get(key) == self._number:
                self._tag[key] = (self._number - 1) & self.MASK

    def _choose(self, victims: list[str], protected: set[str]) -> list[str]:
        chosen: list[str] = []
        for key in self._lru:
            if key in self._refs or key in protected or self._tag.get(key, 0) >= self._number:
                continue
            chosen.append(key)
            if len(chosen) == len(victims):
                return chosen
        return chosen + [k for k in victims if k not in set(chosen)][: len(victims) - len(chosen)]
