"""Keys are NFC-normalised before they are filed ("so equal-looking keys
match"), but keys are opaque strings: U+00E9 and e + U+0301 are two keys.

Dimension: non-ASCII / equal-looking keys.
Exposed by: store(max_bytes=2, object_nbytes=1); put [\u00e9=01];
get [e\u0301] (spec: missing; port: 01).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import unicodedata

from _plain import PlainStore

DIMENSION = "keys"
PROFILE = "strict"
DRIVE = "python"


class BlockObjectStore(PlainStore):
    def _key(self, key: str) -> str:
        return unicodedata.normalize("NFC", key)


SCENARIO = [("new", 2, 1), ("put", [("\u00e9", b"\x01")]), ("get", ["e\u0301"])]
