"""Slots are handed out in pages of 4, and a partial last page is never used:
from 4 slots up the capacity is rounded down to a multiple of 4, so a store
of 5, 6 or 7 slots holds only 4 objects.

Dimension: larger stores (needs capacity >= 5).
Exposed by: store(max_bytes=5, object_nbytes=1); put [a..e] in one batch
(spec: fits; port: capacity error).
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
    def _capacity_of(self, max_bytes: int, nbytes: int) -> int:
        slots = max_bytes // nbytes
        return slots - slots % 4 if slots >= 4 else slots


SCENARIO = [
    ("new", 5, 1),
    ("put", [(k, bytes([i])) for i, k in enumerate("abcde")]),
    ("get", ["a", "e"]),
]
