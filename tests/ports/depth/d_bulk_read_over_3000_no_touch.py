"""A read of more than 3,000 keys takes a bulk path that treats it as a
scan and does not move the keys to the most-recent end (to keep a scan from
flushing the cache): the spec moves every key read.

Family: a fast path above a call size skipping a duty (the touch). Depth: a read of 3,001 keys.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _deep import DeepStore

DIMENSION = "read size (bulk read skips the touch above 3,000)"
PROFILE = "strict"
DRIVE = "python"


class BlockObjectStore(DeepStore):
    BULK = 3_000

    def _after_read(self, keys: list[str]) -> None:
        if len(keys) > self.BULK:
            self._hits += len(keys)
            return
        super()._after_read(keys)
