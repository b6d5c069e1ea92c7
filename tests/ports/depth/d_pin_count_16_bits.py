"""A key's reference count is a 16-bit field: its 65,536th retain wraps the
count to 0, which drops the pin silently (no terminal move), so a key held
65,536 times shows no pin and can be evicted.

Family: counters that wrap (pin counts). Depth: one key pinned 65,536 times.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _deep import DeepStore

DIMENSION = "pins of one key (count, 16 bits)"
PROFILE = "strict"
DRIVE = "python"


class BlockObjectStore(DeepStore):
    MASK = 0xFFFF

    def _retained(self, count: int) -> int:
        return (count + 1) & self.MASK
