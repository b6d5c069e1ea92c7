"""A read moves only its first 8 keys to the most-recent end (the touch
list is a fixed array of 8), so a read of 9 or more keys leaves the rest at
their old place, and eviction takes the wrong key.

Dimension: many distinct keys (a read of 9+ keys); capacity >= 9.
Driven through --exec (auxspec serve this file).
Exposed by: store(max_bytes=9, object_nbytes=1); put k0..k8;
get [k8, k7, ..., k0]; put [n]; get [k0] (spec: stored, k8 was evicted;
port: k0 evicted).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _plain import PlainStore

DIMENSION = "many keys"
PROFILE = "strict"
DRIVE = "exec"


class BlockObjectStore(PlainStore):
    def _touch(self, keys: list[str]) -> None:
        super()._touch(keys[:8])


KEYS = [f"k{i}" for i in range(9)]
SCENARIO = [
    ("new", 9, 1),
    ("put", [(k, b"\x01") for k in KEYS]),
    ("get", KEYS[::-1]),
    ("put", [("n", b"\x02")]),
    ("get", ["k0"]),
]
