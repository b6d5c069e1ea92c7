"""Keys released to zero in one put are collected in a fixed list of 8; the
9th and later terminal keys are not moved to the most-recent end, so they
stay at the old end and are evicted first.

Dimension: many distinct keys (needs 9 keys released to zero in one call).
Exposed by: store(max_bytes=10, object_nbytes=1); put k0..k8 retain k0..k8;
put [z]; put [] release k0..k8; put [y]; get [z]
(spec: z was the least recent, evicted: missing; port: k8 evicted, z there).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from collections import OrderedDict

from _plain import PlainStore

DIMENSION = "many keys"
PROFILE = "strict"
DRIVE = "python"


class BlockObjectStore(PlainStore):
    def _move_terminal(self, lru: OrderedDict[str, int], terminal: list[str]) -> None:
        super()._move_terminal(lru, terminal[:8])


KEYS = [f"k{i}" for i in range(9)]
SCENARIO = [
    ("new", 10, 1),
    ("put", [(k, b"\x01") for k in KEYS], KEYS, []),
    ("put", [("z", b"\x02")]),
    ("put", [], [], KEYS),
    ("put", [("y", b"\x03")]),
    ("get", ["z"]),
]
