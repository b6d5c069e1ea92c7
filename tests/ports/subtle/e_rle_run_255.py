"""Objects larger than a page (4 KiB) are kept run-length encoded with a one-byte run
length; a run longer than 255 bytes is clipped instead of split, so the rest
of the object shifts left and the read is padded with zeros.

Dimension: big or unusual payloads (long runs of one byte value).
Exposed by: store(max_bytes=5000, object_nbytes=5000); put [a=07*5000];
get [a] (spec: 5000 x 07; port: 255 x 07 then zeros).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from typing import Any

from _plain import PlainStore

DIMENSION = "payloads"
PROFILE = "strict"
DRIVE = "python"


def _encode(data: bytes) -> bytes:
    out = bytearray()
    i = 0
    while i < len(data):
        run = 1
        while i + run < len(data) and data[i + run] == data[i]:
            run += 1
        out += bytes((min(run, 255), data[i]))
        i += run
    return bytes(out)


def _decode(packed: bytes, size: int) -> bytes:
    out = bytearray()
    for i in range(0, len(packed), 2):
        out += bytes([packed[i + 1]]) * packed[i]
    return bytes(out[:size]).ljust(size, b"\x00")


class BlockObjectStore(PlainStore):
    def __init__(self, *, max_bytes: object, object_nbytes: object) -> None:
        super().__init__(max_bytes=max_bytes, object_nbytes=object_nbytes)
        self._packed: dict[int, bytes] = {}

    def _write_slot(self, slot: int, data: Any) -> None:
        if self.object_nbytes > 4096:
            self._packed[slot] = _encode(bytes(data))
        else:
            super()._write_slot(slot, data)

    def _read_slot(self, slot: int) -> bytes:
        if self.object_nbytes > 4096:
            return _decode(self._packed[slot], self.object_nbytes)
        return super()._read_slot(slot)


SCENARIO = [
    ("new", 5000, 5000),
    ("put", [("a", b"\x07" * 5000)]),
    ("get", ["a"]),
]
