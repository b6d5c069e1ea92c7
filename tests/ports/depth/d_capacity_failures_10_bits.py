"""``stats().capacity_failures`` is a 10-bit field packed beside others:
the 1,024th capacity failure wraps it to 0.

Family: counters that wrap (stats). Depth: 1,024 capacity failures, then stats().
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _deep import DeepStore

DIMENSION = "capacity failures (stats counter, 10 bits)"
PROFILE = "strict"
DRIVE = "python"


class BlockObjectStore(DeepStore):
    WRAP = 1 << 10

    def _stats_of(self) -> tuple[int, int, int, int]:
        hits, misses, evictions, failures = super()._stats_of()
        return hits, misses, evictions, failures % self.WRAP
