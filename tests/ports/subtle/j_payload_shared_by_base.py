"""Payload copies are cached per batch by the object behind the buffer
(``memoryview(p).obj``), to copy a buffer once when a caller passes it
for several objects: two objects whose payloads are slices of one buffer
are both stored with the first one's bytes.

Dimension: payload kinds (one buffer behind two objects of a batch).
Exposed by: store(max_bytes=4, object_nbytes=2); buf = bytearray(b"abcd");
put [a=memoryview(buf)[:2], b=memoryview(buf)[2:]]; get [a, b]
(spec: "abcd"; port: "abab").
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
    def _batch(self, objects: Any) -> list[tuple[str, Any]]:
        self._copies: dict[int, Any] = {}
        return super()._batch(objects)

    def _payload_of(self, payload: Any) -> Any:
        base = memoryview(payload).obj
        if base is payload:
            return super()._payload_of(payload)
        if id(base) not in self._copies:
            self._copies[id(base)] = super()._payload_of(payload)
        return self._copies[id(base)]


def _shared(store: Any) -> bytes:
    buf = bytearray(b"abcd")
    view = memoryview(buf)
    store.put([BlockObject("a", view[:2]), BlockObject("b", view[2:])])  # type: ignore[arg-type]
    data: bytes = store.get_concatenated(["a", "b"])
    return data


SCENARIO = [("new", 4, 2), ("do", _shared)]
