"""Keys are written with a 16-bit length prefix: a key of 65,536
characters or more is refused with a ValueError ("key too long"), though
the spec sets no limit on a key's length.

Dimension: key code points (keys at a length limit).
Exposed by: store(max_bytes=2, object_nbytes=1); put ["x" * 65536 = 01]
(spec: ok; port: ValueError).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _plain import PlainStore

DIMENSION = "key code points"
PROFILE = "strict"
DRIVE = "python"


class BlockObjectStore(PlainStore):
    def _key(self, key: str) -> str:
        if len(key) > 0xFFFF:
            raise ValueError(f"key of {len(key)} characters: at most 65535")
        return key


SCENARIO = [("new", 2, 1), ("put", [("x" * 65536, b"\x01")]), ("get", ["x" * 65536])]
