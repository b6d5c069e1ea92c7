"""vLLM patched with a bounded eviction scan (a common fix for its
O(pinned) scan): it looks at the 8 least recent keys only, so when those are
all pinned it reports a capacity error although an evictable key exists.

Dimension: upstream profile; larger stores (needs 8 pinned keys, capacity >= 9).
Exposed by (--profile upstream): store(max_bytes=9, object_nbytes=1);
put k0..k7 retain k0..k7; put [a]; put [b] (spec: evicts a; port: capacity error).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from itertools import islice

from _vllm import vllm

DIMENSION = "upstream"
PROFILE = "upstream"
DRIVE = "python"


class BlockObjectStore(vllm.BlockObjectStore):  # type: ignore[misc,name-defined]
    def _evict_to_fit(self, protected: set[str]) -> None:
        excess = len(self._lru) - self.num_slots
        if excess <= 0:
            return
        window = islice(self._lru, 8)
        victims = [k for k in window if k not in self._references and k not in protected][:excess]
        if len(victims) != excess:
            raise vllm.BlockObjectStoreError(f"no room: limit={self.num_slots} objects")
        for victim in victims:
            slot = self._lru.pop(victim)
            if slot != self._UNALLOCATED_SLOT:
                self._free_slots.append(slot)


KEYS = [f"k{i}" for i in range(8)]
SCENARIO = [
    ("new", 9, 1),
    ("put", [(k, b"\x01") for k in KEYS], KEYS, []),
    ("put", [("a", b"\x02")]),
    ("put", [("b", b"\x03")]),
    ("get", ["b"]),
]
