"""The reference count lives in a 3-bit field: an 8th retain wraps it to 0,
which drops the pin silently (no terminal move), so a key held 8 times can be
evicted.

Dimension: pin counts above 2 (needs a count of 8).
Exposed by: store(max_bytes=1, object_nbytes=1); put [a] retain a x8;
put [b] (spec: capacity error, a is pinned; port: evicts a); get [a].
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _plain import PlainStore

DIMENSION = "pin counts"
PROFILE = "strict"
DRIVE = "python"


class BlockObjectStore(PlainStore):
    def _retain_one(self, refs: dict[str, int], key: str) -> None:
        count = (self._count(refs, key) + 1) & 7
        if count:
            refs[key] = count
        else:
            refs.pop(key, None)


SCENARIO = [
    ("new", 1, 1),
    ("put", [("a", b"\x01")], ["a"] * 8, []),
    ("put", [("b", b"\x02")]),
    ("get", ["a"]),
]
