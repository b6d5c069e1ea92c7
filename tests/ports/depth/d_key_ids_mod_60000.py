"""Keys are interned as ids from a table of 60,000 entries, handed out
round-robin on the assumption that a key that old is gone: the 60,001st
key seen gets the first key's id, and while that key is still stored (a
key pinned for the whole life, or a store of more slots) the two alias: the
new key's put is taken as a re-put of the old one.

Family: counters that wrap (key ids). Depth: 60,001 distinct keys, the first still stored.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _deep import DeepStore

from auxstore import StoreSnapshot

DIMENSION = "distinct keys (key ids mod 60,000)"
PROFILE = "strict"
DRIVE = "python"


class BlockObjectStore(DeepStore):
    IDS = 60_000

    def __init__(self, *, max_bytes: Any, object_nbytes: Any) -> None:
        super().__init__(max_bytes=max_bytes, object_nbytes=object_nbytes)
        self._ids: dict[str, str] = {}
        self._names: dict[str, str] = {}
        self._next_id = 0

    def _key(self, key: str) -> str:
        found = self._ids.get(key)
        if found is None:
            found = f"#{self._next_id % self.IDS}"
            self._next_id += 1
            self._ids[key] = found
            self._names[found] = key
        return found

    def __contains__(self, key: object) -> bool:
        self._check_open()
        return isinstance(key, str) and key in self._ids and self._ids[key] in self._lru

    def snapshot(self) -> StoreSnapshot:
        seen = super().snapshot()
        entries = tuple((self._names[k], data) for k, data in seen.entries)
        refs = tuple(sorted((self._names[k], n) for k, n in seen.references))
        return StoreSnapshot(entries, refs, seen.closed)
