"""read_into unwraps a memoryview to the object it views (to get "the raw
buffer"), so a memoryview slice with a nonzero offset is written from the
start of the underlying bytearray, not from the start of the view.

Dimension: unusual buffers (memoryview with a nonzero offset).
Exposed by: store(max_bytes=4, object_nbytes=4); put [a=01020304];
buf = bytearray(8); read_into([a], memoryview(buf)[4:]) then look at buf
(spec: 00000000 01020304; port: 01020304 00000000).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from typing import Any

from _plain import PlainStore

DIMENSION = "buffers"
PROFILE = "strict"
DRIVE = "python"


class BlockObjectStore(PlainStore):
    def _target(self, buffer: Any) -> memoryview:
        view = super()._target(buffer)
        if isinstance(buffer, memoryview) and buffer.obj is not None:
            return super()._target(buffer.obj)
        return view


def _offset_view(store: Any) -> tuple[int, bytes]:
    buf = bytearray(8)
    written: int = store.read_into(["a"], memoryview(buf)[4:])
    return written, bytes(buf)


SCENARIO = [("new", 4, 4), ("put", [("a", b"\x01\x02\x03\x04")]), ("do", _offset_view)]
