"""Every 20th put rebuilds the key index from the insertion log (to drop
tombstones), which restores first-insertion order and forgets every move
made by reads and re-puts since the keys were stored.

Dimension: long histories (needs 20 puts on one store).
Exposed by: store(max_bytes=3, object_nbytes=1); put [a], [b], [c];
get [a]; 17 puts of put([], retain=[z]); put [d]; get [a]
(spec: b was evicted, a stored; port: a evicted).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from collections import OrderedDict

from _plain import PlainStore

DIMENSION = "long histories"
PROFILE = "strict"
DRIVE = "python"


class BlockObjectStore(PlainStore):
    def __init__(self, *, max_bytes: object, object_nbytes: object) -> None:
        super().__init__(max_bytes=max_bytes, object_nbytes=object_nbytes)
        self._log: dict[str, None] = {}
        self._puts = 0

    def _after_put(self, evicted: int) -> None:
        for key in [k for k in self._log if k not in self._lru]:
            del self._log[key]
        for key in self._lru:
            self._log.setdefault(key, None)
        self._puts += 1
        if self._puts % 20 == 0:
            self._lru = OrderedDict((k, self._lru[k]) for k in self._log)


SCENARIO = (
    [("new", 3, 1), ("put", [("a", b"\x01")]), ("put", [("b", b"\x02")]), ("put", [("c", b"\x03")])]
    + [("get", ["a"])]
    + [("put", [], ["z"], [])] * 17
    + [("put", [("d", b"\x04")]), ("get", ["a"])]
)
