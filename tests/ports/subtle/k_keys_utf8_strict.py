"""Keys are filed as their UTF-8 bytes (``key.encode("utf-8")``), as a
store that hands keys to a C hash table would: a key holding a lone
surrogate (which a JSON string's "\\ud800" gives, and Python allows) cannot
be encoded and the call fails with UnicodeEncodeError; every other key is
fine.

Dimension: key code points (lone surrogates).
Exposed by: store(max_bytes=2, object_nbytes=1); put ["k\\ud800" = 01]
(spec: ok; port: UnicodeEncodeError).
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
        return key.encode("utf-8").decode("utf-8")


SCENARIO = [("new", 2, 1), ("put", [("k\ud800", b"\x01")]), ("get", ["k\ud800"])]
