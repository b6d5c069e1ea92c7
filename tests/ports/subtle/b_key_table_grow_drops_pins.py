"""Keys are interned in a table of 8 that doubles when a 9th (17th, ...)
distinct key arrives; the rebuild copies the records of stored keys only, so
a key pinned before it was stored loses its references.

Dimension: more keys than slots / many distinct keys (needs 9 distinct keys).
Exposed by: store(max_bytes=8, object_nbytes=1); put [] retain [p];
put k0..k7; put [] release [p] (spec: fine; port: unreferenced).
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
    def __init__(self, *, max_bytes: object, object_nbytes: object) -> None:
        super().__init__(max_bytes=max_bytes, object_nbytes=object_nbytes)
        self._interned: set[str] = set()
        self._table = 8

    def put(self, objects: object, *, retain_keys: object = (), release_keys: object = ()) -> None:
        super().put(objects, retain_keys=retain_keys, release_keys=release_keys)
        self._interned.update(self._lru)
        self._interned.update(self._refs)
        if len(self._interned) > self._table:
            while len(self._interned) > self._table:
                self._table *= 2
            self._interned = set(self._lru)
            self._refs = {k: c for k, c in self._refs.items() if k in self._lru}


SCENARIO = [
    ("new", 8, 1),
    ("put", [], ["p"], []),
    ("put", [(f"k{i}", bytes([i])) for i in range(8)]),
    ("put", [], [], ["p"]),
]
