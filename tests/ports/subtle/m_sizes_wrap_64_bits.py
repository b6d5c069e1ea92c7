"""Sizes are kept as unsigned 64-bit integers, as a C port's uint64_t is
(after a check that neither is negative): a size past 2**64 wraps, so
max_bytes 2**64 + 16 and object_nbytes 2**65 + 8 (too small for one
object: config) build a store of 16 and 8.

Dimension: sizes (integers past 2**63).
Exposed by: store(max_bytes=2**64 + 16, object_nbytes=2**65 + 8)
(spec: config; port: a store of two objects).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _plain import PlainStore

DIMENSION = "sizes"
PROFILE = "strict"
DRIVE = "python"

U64 = 1 << 64


class BlockObjectStore(PlainStore):
    def __init__(self, *, max_bytes: object, object_nbytes: object) -> None:
        if type(max_bytes) is int and type(object_nbytes) is int and min(max_bytes, object_nbytes) >= 0:
            max_bytes, object_nbytes = max_bytes % U64, object_nbytes % U64  # a negative size is refused first
        super().__init__(max_bytes=max_bytes, object_nbytes=object_nbytes)


SCENARIO = [("new", 2**64 + 16, 2**65 + 8)]
