"""Write elision for objects larger than a page: a payload of more than
4 KiB that is all zero bytes is not copied, on the belief that the arena is
still zero there; but a slot freed by an eviction still holds its old
object's bytes.

Dimension: big or unusual payloads (object_nbytes > 4096, payload all 0x00).
Exposed by: store(max_bytes=6000, object_nbytes=6000); put [a=01*6000];
put [b=00*6000] (evicts a, reuses its slot); get [b] (spec: zeros; port: 01s).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from typing import Any

from _plain import PlainStore

DIMENSION = "payloads"
PROFILE = "strict"
DRIVE = "python"


class BlockObjectStore(PlainStore):
    def _write_slot(self, slot: int, data: Any) -> None:
        if self.object_nbytes > 4096 and not any(data):
            return
        super()._write_slot(slot, data)


SCENARIO = [
    ("new", 6000, 6000),
    ("put", [("a", b"\x01" * 6000)]),
    ("put", [("b", bytes(6000))]),
    ("get", ["b"]),
]
