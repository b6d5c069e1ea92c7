"""auxstore's background store with its writer loop and its queue-full path
written here, with hooks, so each background port overrides one hook.
``LoopStore`` itself conforms (tests/ports/rewrites/r_bg_writer_loop.py).

It reuses the parent's lock protocol: ``_queue`` (batches not yet taken),
``_busy``, ``_error``, ``_stopping`` and the two condition variables.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from auxstore import BackgroundBlockObjectStore as _Good
from auxstore import BlockObjectStore
from auxstore._background import _check_keys, _keys

Batch = tuple[list[Any], tuple[str, ...], tuple[str, ...]]

__all__ = ["BlockObjectStore", "LoopStore"]


class LoopStore(_Good):
    def __init__(self, store: Any, *, max_pending_batches: int) -> None:
        self._overflow: list[Batch] = []  # set before the writer starts
        super().__init__(store, max_pending_batches=max_pending_batches)

    # ------------------------------------------------------------ hooks

    def _when_full(self, batch: Batch) -> bool:
        """The queue is full: handle ``batch`` without waiting (True), or wait (False)."""
        return False

    def _take(self, queue: deque[Batch]) -> Batch:
        return queue.popleft()

    def _stop_early(self, taken_after_stop: int) -> bool:
        """Whether the writer may end while batches are still queued."""
        return False

    # -------------------------------------------------------------- put

    def put(self, objects: Any, *, retain_keys: Any = (), release_keys: Any = ()) -> None:
        if type(objects) in (list, tuple) and objects and not self._stopping:
            with self._lock:
                full = self._error is None and len(self._queue) >= self._max_pending
            if full:
                batch = (
                    self._snapshot(list(objects), objects),
                    _check_keys(_keys(retain_keys), retain_keys, "retain_keys"),
                    _check_keys(_keys(release_keys), release_keys, "release_keys"),
                )
                if self._when_full(batch):
                    return
        super().put(objects, retain_keys=retain_keys, release_keys=release_keys)

    # ----------------------------------------------------------- writer

    def _run(self) -> None:
        lock, queue, store = self._lock, self._queue, self._store
        error: BaseException | None = None
        taken_after_stop = 0
        lock.acquire()
        try:
            while True:
                self._busy = False
                if error is not None:
                    self._error = error
                    queue.clear()
                    self._overflow.clear()
                    error = None
                while not queue and not self._stopping:
                    if self._owner_waits:
                        self._owner_cv.notify()
                    self._writer_waits = True
                    self._writer_cv.wait()
                    self._writer_waits = False
                if not queue or (self._stopping and self._stop_early(taken_after_stop)):
                    return
                if self._stopping:
                    taken_after_stop += 1
                objects, retains, releases = self._take(queue)
                self._busy = True
                if self._owner_waits:
                    self._owner_cv.notify()
                lock.release()
                try:
                    store.put(objects, retain_keys=retains, release_keys=releases)
                except BaseException as failure:
                    error = failure
                finally:
                    lock.acquire()
        finally:
            lock.release()
