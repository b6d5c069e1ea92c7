"""``stats().hits`` is a 16-bit counter: after 65,536 keys read it wraps.

Family: counters that wrap (stats). Depth: 65,536 hits, then stats().
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _deep import DeepStore

DIMENSION = "hits (stats counter, 16 bits)"
PROFILE = "strict"
DRIVE = "python"


class BlockObjectStore(DeepStore):
    WRAP = 1 << 16

    def _stats_of(self) -> tuple[int, int, int, int]:
        hits, misses, evictions, failures = super()._stats_of()
        return hits % self.WRAP, misses, evictions, failures
