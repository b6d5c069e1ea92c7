"""read_into returns the size of the caller's buffer (what a C port's
memcpy wrapper reports) instead of the number of bytes written, so a buffer
larger than needed gives a wrong count.

Dimension: unusual buffers (read_into with a buffer larger than needed).
Exposed by: store(max_bytes=4, object_nbytes=4); put [a];
read_into([a], bytearray(12)) (spec: 4; port: 12).
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
        super()._fill(view, data)
        return view.nbytes


SCENARIO = [("new", 4, 4), ("put", [("a", b"\x01\x02\x03\x04")]), ("read_into", ["a"], 12)]
