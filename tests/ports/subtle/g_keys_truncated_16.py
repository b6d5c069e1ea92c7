"""Keys are filed in a fixed 16-character field, so two keys that share
their first 16 characters are one key.

Dimension: long keys / keys sharing long prefixes.
Exposed by: store(max_bytes=2, object_nbytes=1); put [block-0000000000a=01];
get [block-0000000000b] (spec: missing; port: 01).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _plain import PlainStore

DIMENSION = "keys"
PROFILE = "strict"
DRIVE = "python"


class BlockObjectStore(PlainStore):
    def _key(self, key: str) -> str:
        return key[:16]


SCENARIO = [("new", 2, 1), ("put", [("block-0000000000a", b"\x01")]), ("get", ["block-0000000000b"])]
