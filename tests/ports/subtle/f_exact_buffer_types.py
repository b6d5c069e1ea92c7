"""read_into accepts only a bytearray or a memoryview by exact type (the
fast path's check), so a bytearray subclass, an array.array or a ctypes
array, all writable buffers, is refused with TypeError.

Dimension: unusual buffers (bytearray subclass).
Exposed by: store(max_bytes=2, object_nbytes=2); put [a=0102];
read_into([a], Sub(2)) where Sub subclasses bytearray (spec: 2; port: TypeError).
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
        if type(buffer) not in (bytearray, memoryview):
            raise TypeError(f"buffer must be a bytearray or memoryview, not {type(buffer).__name__}")
        return super()._target(buffer)


class Sub(bytearray):
    pass


def _subclass_buffer(store: Any) -> tuple[int, bytes]:
    buf = Sub(2)
    written: int = store.read_into(["a"], buf)
    return written, bytes(buf)


SCENARIO = [("new", 2, 2), ("put", [("a", b"\x01\x02")]), ("do", _subclass_buffer)]
