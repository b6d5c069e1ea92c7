"""A recency shortcut for big stores: from 8 slots up, a key already among
the 4 most recent is not moved to the most-recent end when it is read or
re-put ("it is hot anyway"), so the order among the hot keys goes stale and
eviction later takes the wrong key.

Dimension: larger stores (needs capacity >= 8).
Exposed by: store(max_bytes=8, object_nbytes=1); put k0..k7; get [k4];
put 5 new keys n0..n4; get [k4] (spec: still stored; port: evicted).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _plain import PlainStore

DIMENSION = "larger stores"
PROFILE = "strict"
DRIVE = "python"


class BlockObjectStore(PlainStore):
    def _touch(self, keys: list[str]) -> None:
        for key in keys:
            if self._cap >= 8 and key in list(self._lru)[-4:]:
                continue
            self._lru.move_to_end(key)


SCENARIO = [
    ("new", 8, 1),
    ("put", [(f"k{i}", bytes([i])) for i in range(8)]),
    ("get", ["k4"]),
    ("put", [(f"n{i}", bytes([16 + i])) for i in range(5)]),
    ("get", ["k4"]),
]
