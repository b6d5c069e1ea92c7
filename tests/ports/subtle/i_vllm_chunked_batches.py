"""vLLM patched to apply a batch of more than 8 objects in chunks of 8 (to
bound the work per call): each chunk is its own put, so a later chunk may
evict an earlier chunk's keys, and a batch larger than the store succeeds.

Dimension: upstream profile; many keys (a batch of 9+ objects).
Exposed by (--profile upstream): store(max_bytes=9, object_nbytes=1);
put k0..k9 in one batch (spec: capacity error; port: succeeds, k0 evicted).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from typing import Any

from _vllm import vllm

DIMENSION = "upstream"
PROFILE = "upstream"
DRIVE = "python"


class BlockObjectStore(vllm.BlockObjectStore):  # type: ignore[misc,name-defined]
    def put(self, objects: Any, *, retain_keys: Any = (), release_keys: Any = ()) -> None:
        objects = list(objects)
        if len(objects) <= 8:
            super().put(objects, retain_keys=retain_keys, release_keys=release_keys)
            return
        super().put(objects[:8], retain_keys=retain_keys, release_keys=release_keys)
        for start in range(8, len(objects), 8):
            super().put(objects[start : start + 8])


SCENARIO = [
    ("new", 9, 1),
    ("put", [(f"k{i}", bytes([i])) for i in range(10)]),
    ("get", ["k9"]),
]
