"""read_into reports the bytes written through a 16-bit count (the C
port's ``uint16_t`` return, fine for "a few small objects"), so a read of
64 KiB or more returns the count modulo 65536.

Dimension: unusual buffers (a big read_into: 64 KiB or more, e.g. 8 objects of 8 KiB).
Exposed by: store(max_bytes=65536, object_nbytes=8192); put k0..k7;
read_into([k0..k7], bytearray(65536)) (spec: 65536; port: 0).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _plain import PlainStore

DIMENSION = "buffers"
PROFILE = "strict"
DRIVE = "python"


class BlockObjectStore(PlainStore):
    def _fill(self, view: memoryview, data: bytes) -> int:
        return super()._fill(view, data) & 0xFFFF


KEYS = [f"k{i}" for i in range(8)]
SCENARIO = [
    ("new", 65536, 8192),
    ("put", [(k, bytes([i]) * 8192) for i, k in enumerate(KEYS)]),
    ("read_into", KEYS, 65536),
]
