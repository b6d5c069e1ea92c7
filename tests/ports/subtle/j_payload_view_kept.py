"""Zero copy for views: a payload given as a ``memoryview`` is kept by
reference (the view, not its bytes), on the idea that a view is already
a stable buffer; ``bytes`` and ``bytearray`` payloads are copied. A
caller that changes the memory behind the view after the put changes the
stored object.

Dimension: payload kinds (a memoryview of the caller's buffer, changed
after the call returns).
Exposed by: store(max_bytes=4, object_nbytes=4); buf = bytearray(01*4);
put [a=memoryview(buf)]; buf[:] = 02*4; get [a] (spec: 01s; port: 02s).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from typing import Any

from _plain import PlainStore

from auxstore import BlockObject

DIMENSION = "payload kinds"
PROFILE = "strict"
DRIVE = "python"


class BlockObjectStore(PlainStore):
    def __init__(self, *, max_bytes: object, object_nbytes: object) -> None:
        super().__init__(max_bytes=max_bytes, object_nbytes=object_nbytes)
        self._borrowed: dict[int, memoryview] = {}

    def _payload_of(self, payload: Any) -> Any:
        if isinstance(payload, memoryview) and payload.c_contiguous:
            return payload
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


def _changed_view(store: Any) -> bytes:
    buf = bytearray(b"\x01" * 4)
    store.put([BlockObject("a", memoryview(buf))])  # type: ignore[arg-type]
    buf[:] = b"\x02" * 4
    data: bytes = store.get_concatenated(["a"])
    return data


SCENARIO = [("new", 4, 4), ("do", _changed_view)]
