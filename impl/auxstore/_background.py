"""``BackgroundBlockObjectStore``: puts applied in FIFO order by a writer thread.

Protocol (the spec is ``auxspec.background``)
---------------------------------------------
One owner thread calls the store; one daemon writer thread applies the
queued batches to the inner store, oldest first. Everything shared lives
under one lock:

- ``_queue``: the batches not yet taken by the writer. ``put`` waits while it
  holds ``max_pending_batches`` of them, so at most ``max_pending_batches + 1``
  batches are outstanding, counting the one the writer is applying.
- ``_busy``: the writer is applying a batch it took.
- ``_error``: the first exception the inner store raised (any
  ``BaseException``). Once set it never changes; the writer drops everything
  queued and every later owner call but an all-empty put raises
  ``BlockObjectStoreError`` from it (``close`` once).

The writer catches everything the inner store raises, so it only ends when
``close`` tells it to; the owner's waits need no escape for a dead writer.

The owner validates and snapshots each batch before queueing it, so bad
input raises at the call with nothing queued and nothing latched, and a
caller that changes its list or buffers afterwards cannot change what is
stored. Reads, ``flush``, ``len``, ``in`` and ``stats`` first wait until the
writer is idle (read-your-writes), then use the inner store on the owner
thread; the writer never touches it while idle.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable
from types import TracebackType
from typing import Any, Protocol

from auxstore._errors import BlockObjectStoreError
from auxstore._types import BlockObject, StoreStats

__all__ = ["BackgroundBlockObjectStore"]

_CLOSED = "auxiliary output store is closed"
_NOT_LISTS = (str, bytes, bytearray)

_Batch = tuple[list[Any], tuple[str, ...], tuple[str, ...]]


class _Inner(Protocol):
    """What the background store needs from the store it wraps."""

    @property
    def object_nbytes(self) -> int: ...

    def put(self, objects: list[Any], *, retain_keys: Iterable[str] = (), release_keys: Iterable[str] = ()) -> None: ...

    def get_concatenated(self, keys: list[str]) -> bytes: ...

    def read_into(self, keys: list[str], buffer: Any) -> int: ...

    def close(self) -> None: ...


def _keys(values: object) -> tuple[Any, ...] | None:
    """``values`` as a tuple, or None when it is not a key list (a str or
    bytes would iterate characters; the rules of ``auxspec.binding.as_keys``)."""
    if type(values) is tuple:
        return values
    if type(values) is list:
        return tuple(values)
    if isinstance(values, _NOT_LISTS) or not isinstance(values, Iterable):
        return None
    return tuple(values)


_FROZEN: dict[type, bool] = {BlockObject: True}


def _is_frozen(kind: type) -> bool:
    """Whether ``kind`` is a frozen dataclass (vLLM's BlockObject is one), so
    its instances can be shared instead of copied; cached per type."""
    frozen = _FROZEN.get(kind)
    if frozen is None:
        params = getattr(kind, "__dataclass_params__", None)
        frozen = _FROZEN[kind] = bool(params is not None and params.frozen)
    return frozen


def _check_keys(keys: tuple[Any, ...] | None, raw: object, what: str) -> tuple[str, ...]:
    if keys is None:
        raise TypeError(f"{what} must be an iterable of str keys, not a {type(raw).__name__}")
    for key in keys:
        if not isinstance(key, str):
            raise TypeError(f"{what} must hold str keys; got {key!r} of type {type(key).__name__}")
    return keys


class BackgroundBlockObjectStore:
    """Serialises puts to ``store`` on a writer thread; drop-in for vLLM's class.

    Strict where vLLM is loose: ``max_pending_batches`` must be an int >= 1;
    batches are validated and snapshotted on the owner thread; a latched
    failure is reported by every later call (``close`` once), chained to its
    cause. Adds ``read_into``, ``flush``, ``len``, ``in``, ``stats`` and
    context-manager use. One owner thread; call ``close`` (or use ``with``)
    so the writer thread ends.
    """

    __slots__ = (
        "_busy",
        "_closed",
        "_error",
        "_lock",
        "_max_pending",
        "_object_nbytes",
        "_owner_cv",
        "_owner_waits",
        "_queue",
        "_stopping",
        "_store",
        "_thread",
        "_writer_cv",
        "_writer_waits",
    )

    def __init__(self, store: _Inner, *, max_pending_batches: int) -> None:
        if not isinstance(max_pending_batches, int) or isinstance(max_pending_batches, bool):
            raise TypeError(f"max_pending_batches must be an int, not {type(max_pending_batches).__name__}")
        if max_pending_batches < 1:
            raise ValueError(f"max_pending_batches must be >= 1, got {max_pending_batches}")
        try:
            nbytes = store.object_nbytes
        except AttributeError:
            raise TypeError(f"store of type {type(store).__name__} has no object_nbytes") from None
        self._store = store
        self._object_nbytes = int(nbytes)
        self._max_pending = int(max_pending_batches)
        self._lock = threading.Lock()
        self._writer_cv = threading.Condition(self._lock)  # a batch was queued, or stop
        self._owner_cv = threading.Condition(self._lock)  # room, idle, or a failure
        self._owner_waits = False  # only notify the owner when it waits
        self._writer_waits = False  # only notify the writer when it waits
        self._queue: deque[_Batch] = deque()
        self._busy = False
        self._stopping = False  # close() began: owner calls now fail as closed
        self._closed = False  # close() finished: closing again does nothing
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="auxstore-background-writer", daemon=True)
        self._thread.start()

    # ----------------------------------------------------------- properties

    @property
    def object_nbytes(self) -> int:
        return self._object_nbytes

    @property
    def max_pending_batches(self) -> int:
        return self._max_pending

    def __repr__(self) -> str:
        state = "closed" if self._stopping else ("failed" if self._error is not None else "open")
        return f"BackgroundBlockObjectStore(max_pending_batches={self._max_pending}, {state}, store={self._store!r})"

    # --------------------------------------------------------------- writer

    def _run(self) -> None:
        lock, queue = self._lock, self._queue
        store = self._store
        error: BaseException | None = None
        lock.acquire()
        try:
            while True:
                # One critical section per batch: finish the last one, take the next.
                self._busy = False
                if error is not None:
                    self._error = error
                    queue.clear()  # skipped: they come after a failure
                    error = None
                while not queue and not self._stopping:
                    if self._owner_waits:
                        self._owner_cv.notify()  # idle
                    self._writer_waits = True
                    self._writer_cv.wait()
                    self._writer_waits = False
                if not queue:
                    return  # stopping, and everything queued is done
                objects, retains, releases = queue.popleft()
                self._busy = True
                if self._owner_waits:
                    self._owner_cv.notify()  # a slot is free
                lock.release()
                try:
                    store.put(objects, retain_keys=retains, release_keys=releases)
                except BaseException as failure:  # latched, whatever it is: the owner re-raises it
                    error = failure
                finally:
                    lock.acquire()
        finally:
            lock.release()

    # ----------------------------------------------------------------- put

    def put(
        self,
        objects: Iterable[Any],
        *,
        retain_keys: Iterable[str] = (),
        release_keys: Iterable[str] = (),
    ) -> None:
        """Queue the batch and return; wait only while the queue is full.

        An all-empty put does nothing, even after close. Invalid input raises
        ``TypeError``/``ValueError`` here with nothing queued.
        """
        items: list[Any] | tuple[Any, ...] | None
        if type(objects) is list or type(objects) is tuple:
            items = objects
        elif isinstance(objects, _NOT_LISTS) or not isinstance(objects, Iterable):
            items = None
        else:
            items = list(objects)
        retains = _keys(retain_keys)
        releases = _keys(release_keys)
        if items is not None and not items and retains == () and releases == ():
            return
        if self._stopping:
            raise RuntimeError(_CLOSED)
        snapshot = self._snapshot(items, objects)
        retained = _check_keys(retains, retain_keys, "retain_keys")
        released = _check_keys(releases, release_keys, "release_keys")
        with self._lock:
            queue = self._queue
            while self._error is None and len(queue) >= self._max_pending:
                self._owner_waits = True
                try:
                    self._owner_cv.wait()
                finally:
                    self._owner_waits = False
            if self._error is None:
                queue.append((snapshot, retained, released))
                if self._writer_waits:
                    self._writer_cv.notify()
                return
        self._raise_if_failed()

    def _snapshot(self, items: list[Any] | tuple[Any, ...] | None, raw: object) -> list[Any]:
        """The batch as immutable objects, validated in the model's order:
        each object's key, then its payload (type, then length)."""
        if items is None:
            raise TypeError(f"objects must be an iterable of objects with key and payload, not {type(raw).__name__}")
        nbytes = self._object_nbytes
        snapshot: list[Any] = []
        append = snapshot.append
        for obj in items:
            try:
                key = obj.key
                payload = obj.payload
            except AttributeError:
                raise TypeError(f"object of type {type(obj).__name__} has no key and payload") from None
            if type(key) is not str and not isinstance(key, str):
                raise TypeError(f"key {key!r} must be a str, not {type(key).__name__}")
            if type(payload) is bytes:
                if len(payload) != nbytes:
                    raise ValueError(f"payload of {key!r} is {len(payload)} bytes; object_nbytes is {nbytes}")
                # A frozen object holding bytes cannot change: share it.
                kind = type(obj)
                append(obj if kind is BlockObject or _is_frozen(kind) else BlockObject(key, payload))
                continue
            try:
                view = memoryview(payload)
            except TypeError:
                raise TypeError(f"payload of {key!r} must be bytes-like, not {type(payload).__name__}") from None
            with view:
                if view.nbytes != nbytes:
                    raise ValueError(f"payload of {key!r} is {view.nbytes} bytes; object_nbytes is {nbytes}")
                append(BlockObject(key, view.tobytes()))  # a copy: the caller may reuse its buffer
        return snapshot

    # ------------------------------------------------------------- failures

    def _raise_if_failed(self) -> None:
        error = self._error
        if error is not None:
            raise BlockObjectStoreError(
                f"a background write failed, so this store stays failed: {type(error).__name__}: {error}"
            ) from error

    # ---------------------------------------------------------------- reads

    def _wait_idle(self) -> None:
        """Wait until every queued batch is applied (or skipped)."""
        with self._lock:
            while self._queue or self._busy:
                self._owner_waits = True
                try:
                    self._owner_cv.wait()
                finally:
                    self._owner_waits = False

    def _ready(self) -> None:
        """Before a read: not closed, every write applied, none failed."""
        if self._stopping:
            raise RuntimeError(_CLOSED)
        self._wait_idle()
        self._raise_if_failed()

    def get_concatenated(self, keys: list[str]) -> bytes:
        """The payloads of ``keys`` joined, after every queued put."""
        self._ready()
        return self._store.get_concatenated(keys)

    def read_into(self, keys: list[str], buffer: Any) -> int:
        """``get_concatenated`` into ``buffer`` (writable, C-contiguous); returns
        the bytes written. A buffer that is too small is a ValueError that
        changes nothing. The inner store must have ``read_into`` (auxstore's
        has; vLLM's has not, and a read into a short buffer could not tell a
        missing key from a short buffer without moving the keys it reads)."""
        self._ready()
        return self._store.read_into(keys, buffer)

    def flush(self) -> None:
        """Wait until every queued put is applied; raise a latched failure."""
        self._ready()

    def __len__(self) -> int:
        self._ready()
        return len(self._store)  # type: ignore[arg-type]

    def __contains__(self, key: object) -> bool:
        self._ready()
        return key in self._store  # type: ignore[operator]

    def stats(self) -> StoreStats:
        self._ready()
        stats: StoreStats = self._store.stats()  # type: ignore[attr-defined]
        return stats

    # ------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """Apply everything queued, stop and join the writer, close the inner
        store, then raise a latched failure. Closing again does nothing."""
        if self._closed:
            return
        with self._lock:
            self._stopping = True
            self._writer_cv.notify()
        # The writer applies what is queued, then ends (a KeyboardInterrupt
        # here leaves the store closable again).
        self._thread.join()
        self._closed = True
        self._store.close()
        self._raise_if_failed()

    def __enter__(self) -> BackgroundBlockObjectStore:
        if self._stopping:
            raise RuntimeError(_CLOSED)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
