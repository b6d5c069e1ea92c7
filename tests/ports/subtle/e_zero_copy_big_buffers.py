"""Zero copy for big objects: a payload of more than 4 KiB given as a
bytearray or memoryview is kept by reference instead of copied, so a caller
that reuses its buffer after the put changes the stored object.

Dimension: big or unusual payloads (object_nbytes > 4096, mutable payload).
Exposed by: store(max_bytes=8192, object_nbytes=8192); buf = bytearray(01*8192);
put [a=buf]; buf[:] = 02*8192; get [a] (spec: 01s; port: 02s).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from typing import Any

from _plain import PlainStore

from auxstore import BlockObject

DIMENSION = "payloads"
PROFILE = "strict"
DRIVE = "python"


class BlockObjectStore(PlainStore):
    def __init__(self, *, max_bytes: object, object_nbytes: object) -> None:
        super().__init__(max_bytes=max_bytes, object_nbytes=object_nbytes)
        self._borrowed: dict[int, memoryview] = {}

    def _payload_of(self, payload: Any) -> Any:
        if self.object_nbytes > 4096 and isinstance(payload, (bytearray, memoryview)):
            return memoryview(payload)
        return super()._payload_of(payload)

    def _write_slot(self, slot: int, data: Any) -> None:
        if isinstance(data, memoryview):
            self._borrowed[slot] = data
        else:
            self._borrowed.pop(slot, None)
            super()._write_slot(slot, data)

    def _read_slot(self, slot: int) -> bytes:
        if slot in self._borrowed:
            return bytes(self._borrowed[slot])
        return super()._read_slot(slot)


def _reused_buffer(store: Any) -> bytes:
    buf = bytearray(b"\x01" * 8192)
    store.put([BlockObject("a", buf)])  # type: ignore[arg-type]
    buf[:] = b"\x02" * 8192
    data: bytes = store.get_concatenated(["a"])
    return data


SCENARIO = [("new", 8192, 8192), ("do", _reused_buffer)]
