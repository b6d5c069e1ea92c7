"""Pins taken on keys that are not stored yet live in a side table of 16
entries; a 17th drops the oldest such pin, so a later release of it fails.

Dimension: more keys than slots (17 distinct pinned keys, none stored).
Exposed by: store(max_bytes=1, object_nbytes=1); put [] retain p0..p16;
put [] release [p0] (spec: fine; port: unreferenced).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _plain import PlainStore

DIMENSION = "many keys"
PROFILE = "strict"
DRIVE = "python"


class BlockObjectStore(PlainStore):
    def _retain_one(self, refs: dict[str, int], key: str) -> None:
        super()._retain_one(refs, key)
        ahead = [k for k in refs if k not in self._lru]
        if len(ahead) > 16:
            del refs[ahead[0]]


PINS = [f"p{i}" for i in range(17)]
SCENARIO = [
    ("new", 1, 1),
    ("put", [], PINS, []),
    ("put", [], [], ["p0"]),
]
