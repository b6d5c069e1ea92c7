"""A memoryview payload is copied from the object it views (``view.obj``,
"the real buffer"), from its start: a view that starts inside a larger
buffer is stored as that buffer's first bytes, not the view's.

Dimension: payload kinds (a memoryview slice with a nonzero offset).
Exposed by: store(max_bytes=2, object_nbytes=2); buf = bytearray(b"xxab");
put [a=memoryview(buf)[2:]]; get [a] (spec: "ab"; port: "xx").
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
    def _payload_of(self, payload: Any) -> Any:
        if isinstance(payload, memoryview) and payload.obj is not None and payload.c_contiguous:
            with memoryview(payload.obj) as base:
                return base.cast("B")[: payload.nbytes].tobytes()
        return super()._payload_of(payload)


def _slice(store: Any) -> bytes:
    buf = bytearray(b"xxab")
    store.put([BlockObject("a", memoryview(buf)[2:])])  # type: ignore[arg-type]
    data: bytes = store.get_concatenated(["a"])
    return data


SCENARIO = [("new", 2, 2), ("do", _slice)]
