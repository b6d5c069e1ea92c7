"""auxstore's background store with its writer loop and its queue-full path
written here, with hooks, so each background port overrides one hook.
``LoopStore`` itself conforms (tests/ports/rewrites/r_bg_writer_loop.py).

It is built on auxstore's shared state (``auxstore._background._Shared``: the
deque ``queue`` of batches not yet taken, ``busy``, ``error``, ``stopping``,
the wake-up queues) and its one batch validator
(``auxstore._batch.check_batch``). The hooks live on a ``Policy``, one per
store, which the writer thread holds instead of the store (so a dropped
store is still collected and its writer stopped, as auxstore's is).
"""

from __future__ import annotations

import threading
import weakref
from collections import deque
from queue import Empty
from typing import Any

from auxstore import BackgroundBlockObjectStore as _Good
from auxstore import BlockObjectStore
from auxstore._background import _WRITER_POLL, _close_orphan, _dropped, _fixed_size, _keys, _new_entry, _Shared
from auxstore._batch import Batch, check_batch

__all__ = ["Batch", "BlockObjectStore", "LoopStore", "Policy"]


class Policy:
    """The hooks, and what they keep. ``shared`` is the store's shared state."""

    def __init__(self, shared: _Shared) -> None:
        self.shared = shared
        self.overflow: deque[Batch] = deque()  # batches parked outside the queue (a port's own)

    def when_full(self, batch: Batch) -> bool:
        """Owner thread, the queue full: handle ``batch`` without waiting (True), or wait (False)."""
        return False

    def take(self, queue: deque[Batch]) -> Batch:
        """Writer thread: the next batch to apply."""
        return queue.popleft()

    def stop_early(self, taken_after_stop: int) -> bool:
        """Writer thread, stopping: whether it may end with batches still queued."""
        return False


class LoopStore(_Good):
    POLICY: type[Policy] = Policy

    def __init__(self, store: Any, *, max_pending_batches: int) -> None:
        for call in ("put", "get_concatenated", "close"):
            if not callable(getattr(store, call, None)):
                raise TypeError(f"store must be a block object store (with {call}()), not {type(store).__name__}")
        kind = type(max_pending_batches)
        if not issubclass(kind, int) or kind is bool:
            raise TypeError(f"max_pending_batches must be an int, not {kind.__name__}")
        bound = int.__int__(max_pending_batches)
        if bound < 1:
            raise ValueError(f"max_pending_batches must be >= 1, got {bound}")
        self._object_nbytes = _fixed_size(store)
        shared = self._s = _Shared(store, bound)
        self._policy = self.POLICY(shared)
        writer = self._thread = threading.Thread(target=_write, args=(shared, self._policy), daemon=True)
        weakref.finalize(self, _dropped, shared, writer).atexit = False
        shared.owner = weakref.ref(self)
        writer.start()

    # -------------------------------------------------------------- put

    def put(self, objects: Any, *, retain_keys: Any = (), release_keys: Any = ()) -> None:
        shared = self._s
        retains, releases = _keys(retain_keys), _keys(release_keys)
        retain_keys = retain_keys if retains is None else retains  # one pass over an iterator
        release_keys = release_keys if releases is None else releases
        full = shared.error is None and len(shared.queue) >= shared.max_pending
        if type(objects) in (list, tuple) and objects and not shared.stopping and full:
            batch = check_batch(objects, retain_keys, release_keys, object_nbytes=self._object_nbytes)
            if self._policy.when_full(batch):
                return
        super().put(objects, retain_keys=retain_keys, release_keys=release_keys)


# ------------------------------------------------------------------ writer


def _write(shared: _Shared, policy: Policy) -> None:
    try:
        _loop(shared, policy)
    except BaseException as death:
        shared.latch(death)
    finally:
        shared.writer_done = True
        if shared.owner_waits:
            shared.owner_wake.put(None)
        if shared.dropped:
            _close_orphan(shared)


def _loop(shared: _Shared, policy: Policy) -> None:
    queue, store, wake = shared.queue, shared.store, shared.writer_wake
    failure: BaseException | None = None
    taken_after_stop = 0
    while True:
        if failure is not None:
            shared.latch(failure)
            policy.overflow.clear()
            failure = None
        elif shared.error is not None:
            queue.clear()
            policy.overflow.clear()
        if not queue:
            shared.busy = False
            if shared.owner_waits:
                shared.owner_wake.put(None)
            shared.writer_waits = True
            while not queue and not shared.stopping:
                try:
                    wake.get(timeout=_WRITER_POLL)
                except Empty:
                    owner = shared.owner
                    if owner is not None and owner() is None:
                        shared.dropped = shared.stopping = True
            shared.writer_waits = False
            if not queue:
                return
        if shared.stopping:
            if policy.stop_early(taken_after_stop):
                queue.clear()  # what is left is dropped
                shared.busy = False
                return
            taken_after_stop += 1
        shared.busy = True
        objects, retains, releases = policy.take(queue)
        if shared.error is not None:
            queue.clear()
            continue
        if shared.owner_waits:
            shared.owner_wake.put(None)
        try:
            store.put(list(map(_new_entry, objects.items())), retain_keys=retains, release_keys=releases)
        except BaseException as error:
            failure = error
