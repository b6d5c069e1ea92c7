"""Counts up to 3 are kept inline and the rest in an overflow table; the
release that empties the overflow entry also decrements the inline field, so
a count of 4 drops to 2 and the key becomes evictable one release early.

Dimension: pin counts above 2 (needs a count of 4 and back down).
Exposed by: store(max_bytes=1, object_nbytes=1); put [a] retain a x5;
put [] release a x4; put [b] (spec: capacity error, a holds 1; port: evicts a).
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
    def _release_one(self, refs: dict[str, int], key: str, terminal: list[str]) -> None:
        if self._count(refs, key) == 4:
            refs[key] = 3  # the overflow entry goes; the inline decrement below runs too
        super()._release_one(refs, key, terminal)


SCENARIO = [
    ("new", 1, 1),
    ("put", [("a", b"\x01")], ["a"] * 5, []),
    ("put", [], [], ["a"] * 4),
    ("put", [("b", b"\x02")]),
    ("get", ["a"]),
]
