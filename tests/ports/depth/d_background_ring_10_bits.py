"""The writer's queue is a ring of 1,024 slots whose indices are kept in 10
bits: with more than 1,024 batches waiting behind the one the writer holds,
the owner's write index wraps onto the oldest waiting batches, which are
overwritten and never applied.

Family: counters that wrap (queued batches). Depth: 1,025 batches waiting
to a background store between two reads, which needs ``max_pending_batches``
above 1,024 (the background search's scaled scenarios stop at 64).
"""

from __future__ import annotations

import sys
from collections import deque
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "subtle"))

from _bg import Batch, BlockObjectStore, LoopStore, Policy

DIMENSION = "queued batches (background ring index, 10 bits)"
PROFILE = "strict"
DRIVE = "python"
__all__ = ["BackgroundBlockObjectStore", "BlockObjectStore"]


class _Ring(Policy):
    RING = 1 << 10

    def take(self, queue: deque[Batch]) -> Batch:
        # The slots the write index lapped hold newer batches: the oldest are gone.
        while len(queue) > self.RING:
            queue.popleft()
        return queue.popleft()


class BackgroundBlockObjectStore(LoopStore):
    POLICY: type[Policy] = _Ring
