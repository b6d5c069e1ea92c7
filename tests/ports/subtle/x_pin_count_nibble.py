"""The reference count is a 4-bit field: the 16th retain wraps it to 0,
which silently unpins the key, so a key held 16 times can be evicted.

Dimension: pin counts above 2 (needs a count of 16).
Driven through --exec (auxspec serve this file).
Exposed by: store(max_bytes=1, object_nbytes=1); put [a] retain a x16;
put [b] (spec: capacity error; port: evicts a).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _plain import PlainStore

DIMENSION = "pin counts"
PROFILE = "strict"
DRIVE = "exec"


class BlockObjectStore(PlainStore):
    def _retain_one(self, refs: dict[str, int], key: str) -> None:
        count = (self._count(refs, key) + 1) & 15
        if count:
            refs[key] = count
        else:
            refs.pop(key, None)


SCENARIO = [
    ("new", 1, 1),
    ("put", [("a", b"\x01")], ["a"] * 16, []),
    ("put", [("b", b"\x02")]),
    ("get", ["a"]),
]
