"""Every 16 evictions the arena is compacted: live objects are packed into
the lowest slots, and the index is rebuilt in slot order instead of recency
order, so after the 16th eviction the next victim can be the wrong key.

Dimension: long histories (needs 16 evictions in one store's life).
Exposed by: store(max_bytes=2, object_nbytes=1); put x0..x16 one per put;
get [x15]; put [x17] (16th eviction, compaction); put [y]; get [x17]
(spec: stored; port: evicted).
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
    _evicted = 0

    def _after_put(self, evicted: int) -> None:
        before, self._evicted = self._evicted, self._evicted + evicted
        if before // 16 != self._evicted // 16:
            live = sorted(self._lru.items(), key=lambda item: item[1])
            payloads = [self._read_slot(slot) for _, slot in live]
            self._lru = OrderedDict()
            for slot, ((key, _), payload) in enumerate(zip(live, payloads, strict=True)):
                self._write_slot(slot, payload)
                self._lru[key] = slot
            self._free = list(range(self._cap - 1, len(live) - 1, -1))
            self._next_slot = self._cap


SCENARIO = (
    [("new", 2, 1)]
    + [("put", [(f"x{i}", bytes([i]))]) for i in range(17)]
    + [("get", ["x15"]), ("put", [("x17", b"\x11")]), ("put", [("y", b"\x20")]), ("get", ["x17"])]
)
