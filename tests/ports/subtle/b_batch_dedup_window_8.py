"""A batch is de-duplicated against a window of the 8 most recent distinct
keys only: a key that repeats further apart is taken for a re-put of a stored
key, so it moves to its last position and keeps its first payload (the spec:
first position, last payload).

Dimension: many distinct keys (a batch of 10+ objects).
Exposed by: store(max_bytes=10, object_nbytes=1); put [a=01, b..i, a=0a];
get [a] (spec: 0a; port: 01).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from collections import deque
from typing import Any

from _plain import PlainStore

DIMENSION = "many keys"
PROFILE = "strict"
DRIVE = "python"


class BlockObjectStore(PlainStore):
    def _dedup(self, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        batch: dict[str, Any] = {}
        recent: deque[str] = deque(maxlen=8)
        for key, payload in pairs:
            if key in batch and key not in recent:
                first = batch.pop(key)  # a re-put: it moves, and the first write wins
                batch[key] = first
            else:
                batch[key] = payload
            if key in recent:
                recent.remove(key)
            recent.append(key)
        return batch


SCENARIO = [
    ("new", 10, 1),
    ("put", [("a", b"\x01")] + [(k, b"\x02") for k in "bcdefghi"] + [("a", b"\x0a")]),
    ("get", ["a"]),
]
