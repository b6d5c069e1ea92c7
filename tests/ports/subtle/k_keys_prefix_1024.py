"""Keys are filed by their first 1,024 characters ("no block hash is
longer"), so keys that share a 1,024-character prefix are one key; keys
up to 1,024 characters are fine.

Dimension: key code points (keys at a length limit).
Exposed by: store(max_bytes=2, object_nbytes=1); put ["x" * 1024 + "/1" = 01];
get ["x" * 1024 + "/2"] (spec: missing; port: 01).
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
        return key[:1024]


SCENARIO = [("new", 2, 1), ("put", [("x" * 1024 + "/1", b"\x01")]), ("get", ["x" * 1024 + "/2"])]
