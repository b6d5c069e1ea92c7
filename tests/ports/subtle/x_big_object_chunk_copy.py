"""Objects over 1 KiB are copied into their slot in 1024-byte chunks, and
the loop stops at the last whole chunk: when object_nbytes is not a
multiple of 1024 the tail of every object is never written.

Dimension: big or unusual payloads (object_nbytes > 1024, not a multiple).
Driven through --exec (auxspec serve this file).
Exposed by: store(max_bytes=1500, object_nbytes=1500); put [a=05*1500];
get [a] (spec: 1500 x 05; port: 1024 x 05 then zeros).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from typing import Any

from _plain import PlainStore

DIMENSION = "payloads"
PROFILE = "strict"
DRIVE = "exec"
CHUNK = 1024


class BlockObjectStore(PlainStore):
    def _write_slot(self, slot: int, data: Any) -> None:
        nbytes = self.object_nbytes
        if nbytes <= CHUNK:
            super()._write_slot(slot, data)
            return
        start = slot * nbytes
        for offset in range(0, nbytes - nbytes % CHUNK, CHUNK):
            self._arena[start + offset : start + offset + CHUNK] = data[offset : offset + CHUNK]


SCENARIO = [("new", 1500, 1500), ("put", [("a", b"\x05" * 1500)]), ("get", ["a"])]
