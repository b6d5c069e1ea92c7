"""Reference counts are a saturating 3-bit field ("a block is shared by at
most 7 requests"): an 8th retain is lost, so the 8th release finds no
reference.

Dimension: pin counts above 2 (needs a count of 8).
Exposed by: store(max_bytes=1, object_nbytes=1); put [a] retain a x8;
put [] release a x8 (spec: fine; port: unreferenced).
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
        refs[key] = min(self._count(refs, key) + 1, 7)


SCENARIO = [
    ("new", 1, 1),
    ("put", [("a", b"\x01")], ["a"] * 8, []),
    ("put", [], [], ["a"] * 8),
]
