"""Keys are stripped of surrounding whitespace (they come from a text
config in the original port), so "a" and "a " are one key.

Dimension: equal-looking keys.
Exposed by: store(max_bytes=2, object_nbytes=1); put [a=01]; get ["a "]
(spec: missing; port: 01).
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
        return key.strip()


SCENARIO = [("new", 2, 1), ("put", [("a", b"\x01")]), ("get", ["a "])]
