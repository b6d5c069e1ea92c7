"""Backpressure without blocking: when the queue is full, a put merges its
batch into the last queued batch instead of waiting. A merged batch is not
two batches: a key put twice keeps the later payload (the spec: first write
wins across batches), and a capacity failure takes both.

Dimension: background store with a full writer queue (max_pending_batches reached).
Exposed by: background(max_pending_batches=1) over a store of 4 one-byte
objects whose writer is held; put [x]; (writer busy) put [a=01] (queued);
put [a=02] (queue full: merged); let the writer go; get [a] (spec: 01; port: 02).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bg import Batch, BlockObjectStore, LoopStore, Policy

DIMENSION = "background full queue"
PROFILE = "strict"
DRIVE = "python"
__all__ = ["BackgroundBlockObjectStore", "BlockObjectStore"]


class _Merges(Policy):
    def when_full(self, batch: Batch) -> bool:
        queue = self.shared.queue
        if not queue:
            return False
        last = queue[-1]
        objects = dict(last.objects)
        objects.update(batch.objects)  # a key in both: the later payload, as within one batch
        queue[-1] = Batch(objects, last.retain_keys + batch.retain_keys, last.release_keys + batch.release_keys)
        return True


class BackgroundBlockObjectStore(LoopStore):
    POLICY = _Merges


SCENARIO = [
    ("bg", 4, 1, 1),
    ("hold",),
    ("put", [("x", b"\x09")]),
    ("started", 1),
    ("put", [("a", b"\x01")]),
    ("allow_later", 10, 0.5),
    ("put", [("a", b"\x02")]),
    ("get", ["a"]),
]
