"""A payload's size is checked with ``len()``, which counts items, not
bytes: an ``array('I')`` or a ``memoryview`` cast to 8-byte items of
exactly ``object_nbytes`` bytes is refused as too short.

Dimension: payload kinds (buffers with 2-, 4- or 8-byte items).
Exposed by: store(max_bytes=8, object_nbytes=8); put [a=array('I', 2 items)]
(spec: ok; port: ValueError, payload).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from array import array
from typing import Any

from _plain import PlainStore

from auxstore import BlockObject

DIMENSION = "payload kinds"
PROFILE = "strict"
DRIVE = "python"


class BlockObjectStore(PlainStore):
    def _payload_of(self, payload: Any) -> Any:
        if len(payload) != self.object_nbytes:
            raise ValueError(f"payload is {len(payload)} bytes, object_nbytes is {self.object_nbytes}")
        return super()._payload_of(payload)


def _words(store: Any) -> bytes:
    store.put([BlockObject("a", array("I", bytes(range(8))))])  # type: ignore[arg-type]
    data: bytes = store.get_concatenated(["a"])
    return data


SCENARIO = [("new", 8, 8), ("do", _words)]
