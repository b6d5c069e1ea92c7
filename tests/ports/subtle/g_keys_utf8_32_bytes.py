"""Keys are stored as UTF-8 in a 32-byte field, cut at 32 bytes (and a
split character dropped), so long non-ASCII keys that differ only after
the 32nd byte are one key; ASCII keys up to 32 characters are fine.

Dimension: long, non-ASCII keys.
Exposed by: store(max_bytes=2, object_nbytes=1); put [16 x U+00E9 + "1"];
get [16 x U+00E9 + "2"] (spec: missing; port: the first key's payload).
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
        return key.encode("utf-8")[:32].decode("utf-8", errors="ignore")


SCENARIO = [("new", 2, 1), ("put", [("\u00e9" * 16 + "1", b"\x01")]), ("get", ["\u00e9" * 16 + "2"])]
