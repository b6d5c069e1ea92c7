"""Objects larger than a page are given page-aligned slots (the stride is
rounded up to a multiple of 4096) and the capacity is computed from that
stride, so a store of 5000-byte objects in 10000 bytes holds one, not two.

Dimension: big or unusual payloads (object_nbytes > 4096, not a power of two).
Exposed by: store(max_bytes=10000, object_nbytes=5000); put [a, b]
(spec: fits; port: capacity error).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _plain import PlainStore

DIMENSION = "payloads"
PROFILE = "strict"
DRIVE = "python"


def _stride(nbytes: int) -> int:
    return -(-nbytes // 4096) * 4096 if nbytes > 4096 else nbytes


class BlockObjectStore(PlainStore):
    def _capacity_of(self, max_bytes: int, nbytes: int) -> int:
        return max(1, max_bytes // _stride(nbytes))

    def _stride(self) -> int:
        return _stride(self.object_nbytes)


SCENARIO = [
    ("new", 10000, 5000),
    ("put", [("a", b"\x01" * 5000), ("b", b"\x02" * 5000)]),
    ("get", ["a", "b"]),
]
