"""vLLM's background store patched never to block the engine loop: when
the queue is full, put drops the oldest batch still waiting and queues its
own ("fresher outputs matter more"), so a queued write is lost.

Dimension: upstream profile; background store with a full writer queue.
Exposed by (--profile upstream): background(max_pending_batches=1), writer
held; put [x]; (busy) put [a]; put [b] (queue full: a's batch dropped);
let the writer go; get [a] (spec: stored; port: missing).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import queue
from typing import Any

from _vllm import vllm

DIMENSION = "upstream"
PROFILE = "upstream"
DRIVE = "python"
BlockObjectStore = vllm.BlockObjectStore


class BackgroundBlockObjectStore(vllm.BackgroundBlockObjectStore):  # type: ignore[misc,name-defined]
    def put(self, objects: Any, *, retain_keys: Any = (), release_keys: Any = ()) -> None:
        retains, releases = tuple(retain_keys), tuple(release_keys)
        if not objects and not retains and not releases:
            return
        if self._closed:
            raise RuntimeError("auxiliary output store is closed")
        item = (objects, retains, releases)
        try:
            self._queue.put_nowait(item)
        except queue.Full:
            try:
                self._queue.get_nowait()
                self._queue.task_done()
            except queue.Empty:
                pass
            self._queue.put(item)
        self._raise_if_failed()


SCENARIO = [
    ("bg", 4, 1, 1),
    ("hold",),
    ("put", [("x", b"\x09")]),
    ("started", 1),
    ("put", [("a", b"\x01")]),
    ("allow_later", 10, 0.5),
    ("put", [("b", b"\x02")]),
    ("get", ["a"]),
]
