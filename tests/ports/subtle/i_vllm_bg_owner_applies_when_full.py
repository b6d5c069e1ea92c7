"""vLLM's background store patched so that, when the queue is full, the
owner does not wait for one free place: it waits until the writer has
caught up and then applies its batch itself ("help instead of idling").
The order stays FIFO, but that batch's failure is raised to the caller and
never latched, so later reads and close do not report it.

Dimension: upstream profile; background store with a full writer queue.
Exposed by (--profile upstream): background(max_pending_batches=1) over a
store of 4 one-byte objects, writer held; put [x]; (busy) put [y] (queued);
put [] release [nope] (queue full: applied by the owner, KeyError raised);
get [y] (spec: BlockObjectStoreError, the failure is latched; port: 00).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
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
        if self._queue.full():
            self._queue.join()
            self._raise_if_failed()
            self._store.put(objects, retain_keys=retains, release_keys=releases)
            return
        self._queue.put((objects, retains, releases))
        self._raise_if_failed()


SCENARIO = [
    ("bg", 4, 1, 1),
    ("hold",),
    ("put", [("x", b"\x09")]),
    ("started", 1),
    ("put", [("y", b"\x00")]),
    ("allow_later", 10, 0.3),
    ("put", [], [], ["nope"]),
    ("get", ["y"]),
]
