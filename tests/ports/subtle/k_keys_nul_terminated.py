"""Keys end at their first NUL, as a C string would: "k\\x000" and
"k\\x001" are both filed as "k".

Dimension: key code points (NUL).
Exposed by: store(max_bytes=2, object_nbytes=1); put ["k\\x000" = 01];
get ["k\\x001"] (spec: missing; port: 01).
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
        return key.split("\0", 1)[0]


SCENARIO = [("new", 2, 1), ("put", [("k\x000", b"\x01")]), ("get", ["k\x001"])]
