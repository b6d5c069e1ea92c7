"""Payloads are copied through a writable view (``memoryview(p).cast('B')``
checked with ``not view.readonly``, as a store that later hands its
slots out for in-place use might): ``bytes`` is special-cased and
copied, every other read-only buffer (a read-only memoryview, a view of
``bytes``) is refused with a TypeError.

Dimension: payload kinds (read-only buffers other than bytes).
Exposed by: store(max_bytes=2, object_nbytes=2);
put [a=memoryview(bytearray(b"ab")).toreadonly()] (spec: ok; port: type).
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
        if not isinstance(payload, bytes) and memoryview(payload).readonly:
            raise TypeError("payload must be bytes or a writable buffer")
        return super()._payload_of(payload)


def _readonly(store: Any) -> bytes:
    store.put([BlockObject("a", memoryview(bytearray(b"ab")).toreadonly())])  # type: ignore[arg-type]
    data: bytes = store.get_concatenated(["a"])
    return data


SCENARIO = [("new", 2, 2), ("do", _readonly)]
