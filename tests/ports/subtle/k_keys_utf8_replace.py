"""Keys are filed as their UTF-8 bytes with errors replaced
(``encode("utf-8", "replace")``, to never fail on odd input): every lone
surrogate becomes "?", so keys that differ only in a lone surrogate
("k\\ud800" and "k\\udfff") are one key.

Dimension: key code points (lone surrogates).
Exposed by: store(max_bytes=2, object_nbytes=1); put ["k\\ud800" = 01];
get ["k\\udfff"] (spec: missing; port: 01).
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
        return key.encode("utf-8", "replace").decode("utf-8")


SCENARIO = [("new", 2, 1), ("put", [("k\ud800", b"\x01")]), ("get", ["k\udfff"])]
