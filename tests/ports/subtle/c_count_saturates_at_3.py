"""Reference counts saturate at 3 ("one per scheduler stage"): a 4th retain
is lost, so the 4th release finds no reference.

Dimension: pin counts above 2 (needs a count of 4).
Exposed by: store(max_bytes=1, object_nbytes=1); put [a] retain a x4;
put [] release a x4 (spec: fine; port: unreferenced).
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
        refs[key] = min(self._count(refs, key) + 1, 3)


SCENARIO = [
    ("new", 1, 1),
    ("put", [("a", b"\x01")], ["a"] * 4, []),
    ("put", [], [], ["a"] * 4),
]
