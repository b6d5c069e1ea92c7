"""Write elision for big objects: a payload of 4 KiB or more that is all
zero bytes is not copied, on the belief that the arena is still zero there;
but a slot freed by an eviction still holds its old object's bytes.

Dimension: big or unusual payloads (object_nbytes >= 4096, payload all 0x00).
Exposed by: store(max_bytes=4096, object_nbytes=4096); put [a=01*4096];
put [b=00*4096] (evicts a, reuses its slot); get [b] (spec: zeros; port: 01s).
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
        if self.object_nbytes >= 4096 and not any(data):
            return
        super()._write_slot(slot, data)


SCENARIO = [
    ("new", 4096, 4096),
    ("put", [("a", b"\x01" * 4096)]),
    ("put", [("b", bytes(4096))]),
    ("get", ["b"]),
]
