"""read_into measures the caller's buffer with len() before casting it to
bytes, which counts items, not bytes: an array('I') or a memoryview of
format 'I' holding enough bytes is refused as too small.

Dimension: unusual buffers (multi-byte item format).
Exposed by: store(max_bytes=8, object_nbytes=4); put [a, b];
read_into([a, b], array('I', [0, 0])) (spec: 8; port: buffer too small).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from array import array
from typing import Any

from _plain import PlainStore

DIMENSION = "buffers"
PROFILE = "strict"
DRIVE = "python"


class BlockObjectStore(PlainStore):
    def read_into(self, keys: Any, buffer: Any) -> int:
        self._items = len(memoryview(buffer)) if _is_buffer(buffer) else 0
        return super().read_into(keys, buffer)

    def _room(self, view: memoryview) -> int:
        return self._items


def _is_buffer(value: Any) -> bool:
    try:
        memoryview(value)
    except TypeError:
        return False
    return True


def _word_buffer(store: Any) -> tuple[int, bytes]:
    buf = array("I", [0, 0])
    written: int = store.read_into(["a", "b"], buf)
    return written, buf.tobytes()


SCENARIO = [
    ("new", 8, 4),
    ("put", [("a", b"\x01\x02\x03\x04"), ("b", b"\x05\x06\x07\x08")]),
    ("do", _word_buffer),
]
