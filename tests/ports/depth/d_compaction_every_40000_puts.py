"""Every 40,000 puts the count table is compacted, and the compaction drops
the counts of keys that are not stored (taking them for leftovers): a key
pinned before its data arrives loses its pin if a compaction falls in
between.

Family: maintenance every K calls getting one case wrong. Depth: 40,000 puts with a key pinned before its data.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _deep import DeepStore

DIMENSION = "puts (compaction every 40,000)"
PROFILE = "strict"
DRIVE = "python"


class BlockObjectStore(DeepStore):
    EVERY = 40_000

    def __init__(self, *, max_bytes: Any, object_nbytes: Any) -> None:
        super().__init__(max_bytes=max_bytes, object_nbytes=object_nbytes)
        self._puts = 0

    def _after_put(self, evicted: int) -> None:
        super()._after_put(evicted)
        self._puts += 1
        if self._puts % self.EVERY == 0:
            self._refs = {k: n for k, n in self._refs.items() if k in self._lru}
