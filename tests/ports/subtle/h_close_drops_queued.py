"""close() lets the writer finish the batch it is applying and take one more,
then stop: with two or more batches still queued at close the rest are
dropped, so a failure among them is never reported by close.

Dimension: background store, several batches outstanding at close.
Exposed by: background(max_pending_batches=2) over a store of 4 one-byte
objects, writer held; put [x]; (writer busy) put [a]; put [] release [nope];
close (spec: BlockObjectStoreError, the release failed; port: returns).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bg import BlockObjectStore, LoopStore, Policy

DIMENSION = "background full queue"
PROFILE = "strict"
DRIVE = "python"
__all__ = ["BackgroundBlockObjectStore", "BlockObjectStore"]


class _StopsEarly(Policy):
    def stop_early(self, taken_after_stop: int) -> bool:
        return taken_after_stop >= 1


class BackgroundBlockObjectStore(LoopStore):
    POLICY = _StopsEarly


SCENARIO = [
    ("bg", 4, 1, 2),
    ("hold",),
    ("put", [("x", b"\x09")]),
    ("started", 1),
    ("put", [("a", b"\x01")]),
    ("put", [], [], ["nope"]),
    ("allow_later", 10, 0.3),
    ("close",),
]
