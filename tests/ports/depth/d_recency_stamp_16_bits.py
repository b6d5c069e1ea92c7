"""Recency is a stamp per key from a 16-bit counter, and eviction pops the
least stamp from a heap (as a C port with ``uint16_t`` stamps would): after
65,536 moves the counter wraps, the keys moved since look the oldest, and a
put evicts one of them instead of the least recent key.

Family: counters that wrap (recency stamps). Depth: 65,536 touches in one life.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _stamps import StampedStore

DIMENSION = "touches (recency stamps, 16 bits)"
PROFILE = "strict"
DRIVE = "python"


class BlockObjectStore(StampedStore):
    WRAP = 1 << 16
