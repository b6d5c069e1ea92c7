"""Non-blocking backpressure: when the queue is full a put parks its batch on
an overflow list and returns; the writer refills the queue from that list,
but from its newest end, so parked batches are applied out of order.

Dimension: background store with a full writer queue (needs 2 batches parked).
Exposed by: background(max_pending_batches=1), writer held; put [x]; (busy)
put [y] (queued); put [a=02], put [a=03] (both parked); let the writer go;
get [a] (spec: 02, first write wins; port: 03).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from collections import deque

from _bg import Batch, BlockObjectStore, LoopStore, Policy

DIMENSION = "background full queue"
PROFILE = "strict"
DRIVE = "python"
__all__ = ["BackgroundBlockObjectStore", "BlockObjectStore"]


class _Overflow(Policy):
    def when_full(self, batch: Batch) -> bool:
        self.overflow.append(batch)
        return True

    def take(self, queue: deque[Batch]) -> Batch:
        batch = queue.popleft()
        if self.overflow:
            queue.append(self.overflow.pop())  # the newest parked batch first
        return batch


class BackgroundBlockObjectStore(LoopStore):
    POLICY = _Overflow


SCENARIO = [
    ("bg", 4, 1, 1),
    ("hold",),
    ("put", [("x", b"\x09")]),
    ("started", 1),
    ("put", [("y", b"\x08")]),
    ("allow_later", 10, 0.5),
    ("put", [("a", b"\x02")]),
    ("put", [("a", b"\x03")]),
    ("get", ["a"]),
]
