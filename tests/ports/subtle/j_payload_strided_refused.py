"""Payloads must be C-contiguous: a ``memoryview`` that is not (every
other byte of a larger buffer) is refused with a TypeError, as a store
that copies with one ``memmove`` would, though the spec takes any
buffer as its bytes.

Dimension: payload kinds (a buffer that is not C-contiguous).
Exposed by: store(max_bytes=2, object_nbytes=2);
put [a=memoryview(bytearray(b"a-b-"))[::2]] (spec: ok, "ab"; port: type).
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
        if not memoryview(payload).c_contiguous:
            raise TypeError("payload must be a C-contiguous buffer")
        return super()._payload_of(payload)


def _strided(store: Any) -> bytes:
    store.put([BlockObject("a", memoryview(bytearray(b"a-b-"))[::2])])  # type: ignore[arg-type]
    data: bytes = store.get_concatenated(["a"])
    return data


SCENARIO = [("new", 2, 2), ("do", _strided)]
