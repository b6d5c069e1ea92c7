"""vLLM's background store patched with a replay guard: each batch carries
a sequence number and the writer skips a batch whose number is not above the
last one applied. The number is kept in 6 bits, so it wraps after 64
batches and from the 65th on every batch is skipped as a replay.

Dimension: long histories (65+ batches); background; upstream profile.
Exposed by (--profile upstream): background(max_pending_batches=4) over a
store of 100 one-byte objects; put [k0] ... put [k64]; get [k64]
(spec: stored; port: missing).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from typing import Any

from _vllm import vllm

DIMENSION = "long histories"
PROFILE = "upstream"
DRIVE = "python"
BlockObjectStore = vllm.BlockObjectStore


class BackgroundBlockObjectStore(vllm.BackgroundBlockObjectStore):  # type: ignore[misc,name-defined]
    def __init__(self, store: Any, *, max_pending_batches: int) -> None:
        self._seq = 0
        super().__init__(store, max_pending_batches=max_pending_batches)

    def put(self, objects: Any, *, retain_keys: Any = (), release_keys: Any = ()) -> None:
        retains, releases = tuple(retain_keys), tuple(release_keys)
        if not objects and not retains and not releases:
            return
        if self._closed:
            raise RuntimeError("auxiliary output store is closed")
        self._queue.put((self._seq & 63, objects, retains, releases))
        self._seq += 1
        self._raise_if_failed()

    def _run(self) -> None:
        last = -1
        while True:
            update = self._queue.get()
            try:
                if update is None:
                    return
                seq, objects, retains, releases = update
                if seq <= last:
                    continue  # a replay of a batch already applied
                last = seq
                if self._error is None:
                    self._store.put(objects, retain_keys=retains, release_keys=releases)
            except BaseException as error:
                self._error = error
            finally:
                self._queue.task_done()


SCENARIO = [("bg", 100, 1, 4)] + [("put", [(f"k{i}", bytes([i]))]) for i in range(65)] + [("get", ["k64"])]
