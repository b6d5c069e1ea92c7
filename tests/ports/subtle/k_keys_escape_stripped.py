"""Keys are "sanitised" against terminal escapes by dropping every control
character but white space (ESC, DEL, C1 controls; tab, newline and
carriage return are kept), and the sanitised key is what is filed:
"k\\x1b0\\x7f" is stored as "k0".

Dimension: key code points (control characters other than white space).
Exposed by: store(max_bytes=2, object_nbytes=1); put ["k\\x1b0\\x7f" = 01];
get ["k0"] (spec: missing; port: 01).
"""

from __future__ import annotations

import sys
import unicodedata
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _plain import PlainStore

DIMENSION = "key code points"
PROFILE = "strict"
DRIVE = "python"


class BlockObjectStore(PlainStore):
    def _key(self, key: str) -> str:
        return "".join(ch for ch in key if ch.isspace() or unicodedata.category(ch) != "Cc")


SCENARIO = [("new", 2, 1), ("put", [("k\x1b0\x7f", b"\x01")]), ("get", ["k0"])]
