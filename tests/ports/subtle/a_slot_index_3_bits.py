"""The slot table packs each slot number into 3 bits of an entry, so slot 8
aliases slot 0 (slot 9 aliases 1, ...): with 9 or more slots a new object
overwrites the payload of an old one.

Dimension: larger stores (needs capacity >= 9).
Exposed by: store(max_bytes=9, object_nbytes=1); put k0..k8 with payloads
0..8; get [k0] (spec: 00; port: 08).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _plain import PlainStore

DIMENSION = "larger stores"
PROFILE = "strict"
DRIVE = "python"


class BlockObjectStore(PlainStore):
    def _write_slot(self, slot: int, data: object) -> None:
        super()._write_slot(slot & 7, data)

    def _read_slot(self, slot: int) -> bytes:
        return super()._read_slot(slot & 7)


SCENARIO = [
    ("new", 9, 1),
    ("put", [(f"k{i}", bytes([i])) for i in range(9)]),
    ("get", ["k0"]),
]
