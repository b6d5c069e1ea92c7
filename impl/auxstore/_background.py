"""``BackgroundBlockObjectStore``: puts applied in FIFO order by a writer thread.

Protocol (the spec is ``auxspec.background``)
---------------------------------------------
One owner thread calls the store; one daemon writer thread applies the
queued batches to the inner store, oldest first. The shared state is a
``_Shared`` object (never the store itself, so a dropped store can be
collected and its writer told to stop):

- ``queue``: the batches not yet taken by the writer. ``put`` waits while it
  holds ``max_pending_batches`` of them, so at most ``max_pending_batches + 1``
  batches are outstanding, counting the one the writer is applying. Only the
  owner appends, only the writer pops.
- ``busy``: the writer is applying a batch it took (set before it pops).
- ``error``: the first failure (any ``BaseException`` the inner store raised,
  or whatever ended the writer's own loop). Once set it never changes; the
  writer drops everything queued and every later owner call but an all-empty
  put raises ``BlockObjectStoreError`` from it (``close`` once).

There is no lock. Every shared field is one attribute or one ``deque``, each
read or written by one atomic operation under the GIL, and each side wakes
the other through a ``SimpleQueue`` of tokens (C code, interruptible), so an
exception at any point of either thread (a ``KeyboardInterrupt`` on the
owner, a failure of the writer's own loop) cannot leave a lock held or a
structure half-changed: a batch is queued by one ``append``, so exactly once
or not at all. A side that is about to sleep first sets its ``*_waits`` flag,
then checks its condition; the other side first changes the state, then
reads the flag; so a wake-up cannot be lost between them.

No hang: every owner wait (a full queue, the reads and ``flush``, and
``close`` waiting for the writer to end) is a bounded ``get`` in a loop that
also checks that the writer thread is alive (a writer that died without
latching its failure is latched by the owner) and wakes the writer if it
sleeps with work to do (a wake-up lost to an interrupted call). None is a
bare ``Thread.join()``: a main thread asleep in one handles no signal, and
on CPython 3.11 a traced writer (coverage's tracer) with a signal pending
that only the main thread may handle spins in the eval loop's pending-call
check without ever getting past it (gdb: ``handle_signals`` from
``eval_frame_handle_pending``), so close() waited for it for ever. The
writer's waits are bounded too, and it ends by itself when its store was
dropped.

The owner validates and snapshots each batch before queueing it, so bad
input raises at the call with nothing queued and nothing latched, and a
caller that changes its list, buffers or objects afterwards cannot change
what is stored. Reads, ``flush``, ``len``, ``in`` and ``stats`` first wait
until the writer is idle (read-your-writes), then use the inner store on the
owner thread; the writer never touches it while idle.
"""

from __future__ import annotations

import contextlib
import functools
import operator
import sys
import threading
import weakref
from collections import deque
from collections.abc import Callable, Iterable
from queue import Empty, SimpleQueue
from types import CodeType, FrameType, TracebackType
from typing import Any, NamedTuple, Protocol, TypeVar

from auxstore._batch import Batch, check_batch
from auxstore._errors import BlockObjectStoreError, ReentrantCallError
from auxstore._types import StoreStats

__all__ = ["BackgroundBlockObjectStore", "WriterDiedError"]

_CLOSED = "auxiliary output store is closed"
_CLOSE = operator.methodcaller("close")  # a C callable: see _Shared.close_inner
_NOT_LISTS = (str, bytes, bytearray)
# Backstops only: every wake-up is also signalled. The owner re-checks the
# writer's life this often while it waits; the writer re-checks for work and
# for its store having been dropped.
_OWNER_POLL = 0.05
_WRITER_POLL = 1.0



class WriterDiedError(BlockObjectStoreError):
    """The writer thread ended without reporting why (the cause of a latched
    failure when nothing better is known)."""


class _Inner(Protocol):
    """What the background store needs from the store it wraps (duck-typed:
    ``object_nbytes`` is optional, read only to check payload sizes early)."""

    def put(self, objects: list[Any], *, retain_keys: Iterable[str] = (), release_keys: Iterable[str] = ()) -> None: ...

    def get_concatenated(self, keys: list[str]) -> bytes: ...

    def close(self) -> None: ...


class _Shared:
    """Everything the owner and the writer share."""

    __slots__ = (
        "busy",
        "closed",
        "dropped",
        "error",
        "in_call",
        "inner_closes",
        "max_pending",
        "orphan_claim",
        "owner",
        "owner_waits",
        "owner_wake",
        "queue",
        "reported",
        "stopping",
        "store",
        "writer_done",
        "writer_waits",
        "writer_wake",
    )

    def __init__(self, store: Any, max_pending: int) -> None:
        self.store = store
        self.max_pending = max_pending
        self.owner_wake: SimpleQueue[None] = SimpleQueue()  # room, idle, a failure, or the writer ended
        self.writer_wake: SimpleQueue[None] = SimpleQueue()  # a batch was queued, or stop
        self.owner_waits = False  # the writer wakes the owner only when it waits
        self.writer_waits = False  # the owner wakes the writer only when it waits
        self.queue: deque[Batch] = deque()
        self.busy = False
        self.stopping = False  # close() began or the store was dropped: the writer ends when idle
        self.dropped = False  # the store became garbage: the inner store is closed for it
        self.closed = False  # close() finished: closing again does nothing
        self.inner_closes: list[object] = []  # one entry once the inner store's close returned
        self.reported = False  # close() raised the latched failure
        self.writer_done = False
        self.orphan_claim = [None]  # popped (atomically) by whoever closes a dropped store's inner store
        self.error: BaseException | None = None
        self.in_call = False  # an owner call runs (a hint: the stack says which, see _refuse_reentry)
        self.owner: weakref.ref[Any] | None = None  # the store, weakly: a backstop for its finalizer

    def latch(self, error: BaseException) -> None:
        """Record the first failure, skip what is queued, wake the owner."""
        if self.error is None:
            self.error = error
        self.queue.clear()
        self.busy = False
        if self.owner_waits:
            self.owner_wake.put(None)

    def close_inner(self) -> None:
        """Close the inner store once; a close that raised is retried next time."""
        if not self.inner_closes:
            # The call and its record are one C call (list.extend over map):
            # no bytecode of this frame, where an interruption (a signal, an
            # injected exception) lands, falls between the close returning
            # and its record. So a close that raised is retried, and one that
            # returned is never repeated.
            self.inner_closes.extend(map(_CLOSE, (self.store,)))


# ---------------------------------------------------------------- the writer


def _write(shared: _Shared) -> None:
    """The writer thread's body. It holds no reference to the store object."""
    try:
        _write_loop(shared)
    except BaseException as death:  # the loop itself failed: latch it, so no owner waits for a dead writer
        shared.latch(death)
    finally:
        shared.writer_done = True
        if shared.owner_waits:
            shared.owner_wake.put(None)
        if shared.dropped:
            _close_orphan(shared)


def _write_loop(shared: _Shared) -> None:
    queue, store, wake = shared.queue, shared.store, shared.writer_wake
    failure: BaseException | None = None
    while True:
        if failure is not None:
            shared.latch(failure)
            failure = None
        elif shared.error is not None:
            queue.clear()  # put after a failure it had not seen yet: skipped
        if not queue:
            shared.busy = False
            if shared.owner_waits:
                shared.owner_wake.put(None)  # idle
            # Set before the check, so an owner that appends after it sees the flag.
            shared.writer_waits = True
            while not queue and not shared.stopping:
                try:
                    wake.get(timeout=_WRITER_POLL)
                except Empty:
                    if _orphaned(shared):  # the finalizer did not run (or was interrupted)
                        shared.dropped = shared.stopping = True
            shared.writer_waits = False
            if not queue:
                return  # stopping, and everything queued is done
        shared.busy = True  # before the pop: the owner never sees an empty queue and an idle writer early
        objects, retains, releases = queue.popleft()
        if shared.error is not None:
            # Latched since this batch was queued (an owner that checked the
            # latch just before it was set appends just after): it is behind
            # the failure, so it is skipped, with everything queued after it.
            queue.clear()
            continue
        if shared.owner_waits:
            shared.owner_wake.put(None)  # a slot is free
        try:
            store.put(list(map(_new_entry, objects.items())), retain_keys=retains, release_keys=releases)
        except BaseException as error:  # latched, whatever it is: the owner re-raises it
            failure = error


# threading's own table of running threads (ident -> Thread): each thread
# enters itself before start() returns and removes itself when its body has
# returned. Read one entry at a time, with no lock (see _alive).
_RUNNING: dict[int, threading.Thread] = threading._active  # type: ignore[attr-defined]


def _alive(thread: threading.Thread) -> bool:
    """Whether ``thread`` still runs, from threading's table of running
    threads (the same Thread object under its id: an id reused by a later
    thread is another object).

    Not ``Thread.is_alive()`` or ``join()``: on CPython before 3.13 an
    exception raised into either while the thread runs (a KeyboardInterrupt
    in the owner) releases the running thread's end-of-life lock and marks it
    stopped for good (``_wait_for_tstate_lock``'s bpo-45274 handler), so the
    owner would latch a false ``WriterDiedError`` and close the inner store
    under the writer's put. Nor ``threading.enumerate()``: it waits for a lock
    that an ending thread holds while it runs Python code (a weakref callback
    in ``Thread._delete``), where a traced thread can spin (see the module
    docstring). Nor the thread's frames (``sys._current_frames()``): reading
    another thread's frame locals crashed CPython 3.11."""
    return _RUNNING.get(thread.ident or 0) is thread  # ident 0: never a thread's


def _orphaned(shared: _Shared) -> bool:
    owner = shared.owner
    return owner is not None and owner() is None


def _close_orphan(shared: _Shared) -> None:
    """Close a dropped store's inner store, once (the writer and the
    finalizer may both get here); no one is left to report a failure to."""
    try:
        shared.orphan_claim.pop()
    except IndexError:
        return
    # Nobody to tell: the store was dropped. An interruption landing in the
    # first try (before close_inner records a close) would be swallowed with
    # it, and the claim is taken, so no one else would close: try once more
    # (close_inner closes at most once, so a second try after a close does nothing).
    for _ in range(2):
        with contextlib.suppress(Exception):
            shared.close_inner()


def _dropped(shared: _Shared, writer: threading.Thread) -> None:
    """``weakref.finalize`` callback: the store became garbage without close().
    The writer applies what is queued, closes the inner store and ends."""
    shared.dropped = True
    shared.stopping = True
    shared.writer_wake.put(None)
    if shared.writer_done or not writer.is_alive():  # it already ended (or never ran): close here
        if shared.error is None and (shared.queue or shared.busy):
            shared.latch(WriterDiedError("the background writer thread ended with batches not applied"))
        _close_orphan(shared)


# ------------------------------------------------------------ the snapshot


class _Entry(NamedTuple):
    """One object of a queued batch, as the inner store is given it: any
    store reads ``key`` and ``payload`` (built from a checked Batch on the
    writer thread, at C speed)."""

    key: str
    payload: bytes


# (key, payload) -> _Entry without a Python-level call per object
_new_entry: Callable[[tuple[str, bytes]], _Entry] = functools.partial(tuple.__new__, _Entry)


def _keys(values: object) -> tuple[Any, ...] | None:
    """``values`` as a tuple, or None when it is not a key list (which
    ``check_batch`` then refuses); one pass over an iterator. ``put`` takes a
    plain tuple as it is, without this call."""
    if type(values) is list:
        return tuple(values)
    if isinstance(values, _NOT_LISTS) or not isinstance(values, Iterable):
        return None
    return tuple(values)


def _fixed_size(store: object) -> int | None:
    """The inner store's object size when it states a fixed int one (a real
    int: a Mock attribute or a property that raises states nothing)."""
    try:
        nbytes = store.object_nbytes  # type: ignore[attr-defined]
    except Exception:
        return None
    if issubclass(type(nbytes), int) and not isinstance(nbytes, bool):
        return int.__int__(nbytes)  # its value, whatever the subclass's __int__ says
    return None


# ---------------------------------------------------------------- the store

_R = TypeVar("_R")
_OWNER_CODES: set[CodeType] = set()  # the frames of a running owner call


def _owner_call(method: Callable[..., _R]) -> Callable[..., _R]:
    """Mark ``method`` as an owner call: refused (ReentrantCallError) while
    another of the store's calls runs on the same thread."""
    name = method.__name__

    @functools.wraps(method)
    def call(self: BackgroundBlockObjectStore, *args: Any, **kwargs: Any) -> _R:
        shared = self._s
        if shared.in_call:
            self._refuse_reentry(name)
        try:
            shared.in_call = True
            return method(self, *args, **kwargs)
        finally:
            shared.in_call = False

    _OWNER_CODES.add(method.__code__)
    return call


def _running_name(frame: FrameType) -> str:
    return frame.f_code.co_name




class BackgroundBlockObjectStore:
    """Serialises puts to ``store`` on a writer thread; drop-in for vLLM's class.

    Strict where vLLM is loose: ``max_pending_batches`` must be an int >= 1;
    batches are validated and snapshotted on the owner thread; a latched
    failure is reported by every later call (``close`` once), chained to its
    cause. Adds ``read_into``, ``flush``, ``len``, ``in``, ``stats`` and
    context-manager use. One owner thread. A store dropped without ``close``
    stops its writer: queued batches are still applied, then the inner store
    is closed, and a failure is not reported to anyone.
    """

    __slots__ = ("__weakref__", "_object_nbytes", "_s", "_thread")

    def __init__(self, store: _Inner, *, max_pending_batches: int) -> None:
        # Duck-typed, as vLLM's is: a store is anything with these calls (the spec checks the inner store first).
        for call in ("put", "get_concatenated", "close"):
            if not callable(getattr(store, call, None)):
                raise TypeError(f"store must be a block object store (with {call}()), not {type(store).__name__}")
        kind = type(max_pending_batches)
        if not issubclass(kind, int) or kind is bool:
            raise TypeError(f"max_pending_batches must be an int, not {kind.__name__}")
        bound = int.__int__(max_pending_batches)  # by value: a subclass's __int__/__index__ may lie
        if bound < 1:
            raise ValueError(f"max_pending_batches must be >= 1, got {bound}")
        self._object_nbytes = _fixed_size(store)
        shared = self._s = _Shared(store, bound)
        writer = self._thread = threading.Thread(
            target=_write, args=(shared,), name="auxstore-background-writer", daemon=True
        )
        # Registered before the thread starts, so a store dropped at any point stops it.
        weakref.finalize(self, _dropped, shared, writer).atexit = False
        shared.owner = weakref.ref(self)
        writer.start()

    # ----------------------------------------------------------- properties

    @property
    def object_nbytes(self) -> Any:
        """The inner store's ``object_nbytes`` (for auxstore's store, an int)."""
        if self._object_nbytes is not None:
            return self._object_nbytes
        return self._s.store.object_nbytes

    @property
    def max_pending_batches(self) -> int:
        return self._s.max_pending

    def __repr__(self) -> str:
        s = self._s
        state = "closed" if s.stopping else ("failed" if s.error is not None else "open")
        return f"BackgroundBlockObjectStore(max_pending_batches={s.max_pending}, {state}, store={s.store!r})"

    # ---------------------------------------------------------- re-entrancy

    def _refuse_reentry(self, call: str) -> None:
        """The slow path of every owner call's entry check: raise if one of
        this store's own calls is running on this thread's stack (a key,
        payload, iterable or signal handler calling back). A mark left by a
        call that an exception interrupted is stale: ignored."""
        frame: FrameType | None = sys._getframe(2)  # above the refused call's own frame
        while frame is not None:
            if frame.f_code in _OWNER_CODES and frame.f_locals.get("self") is self:
                raise ReentrantCallError(
                    f"{call}() was called while {_running_name(frame)}() is running on the same background store "
                    f"(from a key, payload, iterable or signal handler it uses); its calls cannot nest"
                )
            frame = frame.f_back

    # ---------------------------------------------------------------- waits

    def _wait(self, shared: _Shared, idle: bool) -> None:
        """Wait until the writer is idle (``idle``) or the queue has room, or
        a failure is latched. Bounded: wakes a writer that sleeps with work
        queued (a lost wake-up) and latches a writer that died."""
        queue, wake = shared.queue, shared.owner_wake
        shared.owner_waits = True  # before the checks: see the class docstring
        try:
            while shared.error is None and (
                (queue or shared.busy) if idle else len(queue) >= shared.max_pending
            ):
                if queue and shared.writer_waits:
                    shared.writer_wake.put(None)
                try:
                    wake.get(timeout=_OWNER_POLL)
                except Empty:
                    if shared.error is None and not _alive(self._thread):
                        shared.latch(WriterDiedError("the background writer thread ended unexpectedly"))
        finally:
            shared.owner_waits = False

    def _wait_ended(self, shared: _Shared) -> None:
        """Wait until the writer has ended (``close``), as ``_wait`` waits:
        bounded waits that wake the writer if it sleeps (a wake-up lost to an
        interrupted close) and watch that it lives. Never ``Thread.join()``
        alone: see ``_alive``."""
        wake = shared.owner_wake
        shared.owner_waits = True  # before the checks: see the class docstring
        try:
            while not shared.writer_done and _alive(self._thread):
                if shared.writer_waits:
                    shared.writer_wake.put(None)
                with contextlib.suppress(Empty):
                    wake.get(timeout=_OWNER_POLL)
        finally:
            shared.owner_waits = False
        # It has set writer_done: what is left of it returns at once (bounded all the same).
        self._thread.join(_WRITER_POLL)

    def _wait_idle(self) -> None:
        """Wait until every queued batch is applied (or skipped)."""
        shared = self._s
        if shared.queue or shared.busy:
            self._wait(shared, idle=True)

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
        shared = self._s
        if shared.in_call:
            self._refuse_reentry("put")
        try:
            shared.in_call = True
            items: list[Any] | tuple[Any, ...] | None
            if type(objects) is list or type(objects) is tuple:
                items = objects
            elif isinstance(objects, _NOT_LISTS) or not isinstance(objects, Iterable):
                items = None
            else:
                items = list(objects)
            # A tuple (the default) is taken as it is without a call.
            retains = retain_keys if type(retain_keys) is tuple else _keys(retain_keys)
            releases = release_keys if type(release_keys) is tuple else _keys(release_keys)
            if items is not None and not items and retains == () and releases == ():
                return
            if shared.stopping:
                raise RuntimeError(_CLOSED)
            # The one batch validator (auxstore._batch): by value, so nothing the
            # caller holds or runs reaches the writer thread.
            batch = check_batch(
                objects if items is None else items,
                retain_keys if retains is None else retains,
                release_keys if releases is None else releases,
                object_nbytes=self._object_nbytes,
            )
            queue = shared.queue
            if shared.error is None and len(queue) >= shared.max_pending:
                self._wait(shared, idle=False)
            if shared.error is None:
                queue.append(batch)  # the one step that queues it
                if shared.writer_waits:
                    shared.writer_wake.put(None)
                return
            self._raise_if_failed()
        finally:
            shared.in_call = False

    # ------------------------------------------------------------- failures

    def _raise_if_failed(self) -> None:
        error = self._s.error
        if error is not None:
            raise BlockObjectStoreError(
                f"a background write failed, so this store stays failed: {type(error).__name__}: {error}"
            ) from error

    # ---------------------------------------------------------------- reads

    def _ready(self) -> None:
        """Before a read: not closed, every write applied, none failed."""
        if self._s.stopping:
            raise RuntimeError(_CLOSED)
        self._wait_idle()
        self._raise_if_failed()

    @_owner_call
    def get_concatenated(self, keys: list[str]) -> bytes:
        """The payloads of ``keys`` joined, after every queued put."""
        self._ready()
        joined: bytes = self._s.store.get_concatenated(keys)
        return joined

    @_owner_call
    def read_into(self, keys: list[str], buffer: Any) -> int:
        """``get_concatenated`` into ``buffer`` (writable, C-contiguous); returns
        the bytes written. A buffer that is too small is a ValueError that
        changes nothing. The inner store must have ``read_into`` (auxstore's
        has; vLLM's has not, and a read into a short buffer could not tell a
        missing key from a short buffer without moving the keys it reads)."""
        self._ready()
        written: int = self._s.store.read_into(keys, buffer)
        return written

    @_owner_call
    def flush(self) -> None:
        """Wait until every queued put is applied; raise a latched failure."""
        self._ready()

    @_owner_call
    def __len__(self) -> int:
        self._ready()
        return len(self._s.store)

    @_owner_call
    def __contains__(self, key: object) -> bool:
        self._ready()
        return key in self._s.store

    @_owner_call
    def stats(self) -> StoreStats:
        self._ready()
        stats: StoreStats = self._s.store.stats()
        return stats

    # ------------------------------------------------------------ lifecycle

    @_owner_call
    def close(self) -> None:
        """Apply everything queued, wait for the writer to end, close the inner
        store, then raise a latched failure. Closing again does nothing.

        Interrupted (a KeyboardInterrupt, say), the store is closing: other
        calls fail as closed, and calling close again finishes the job."""
        shared = self._s
        if shared.closed:
            return
        shared.stopping = True
        shared.writer_wake.put(None)  # every time: an earlier close may have been interrupted before it
        # The writer applies what is queued, then ends; a writer that died has ended.
        self._wait_ended(shared)
        if shared.error is None and (shared.queue or shared.busy):
            shared.latch(WriterDiedError("the background writer thread ended with batches not applied"))
        shared.close_inner()
        shared.closed = True
        if shared.error is not None and not shared.reported:
            shared.reported = True
            self._raise_if_failed()

    def __enter__(self) -> BackgroundBlockObjectStore:
        if self._s.stopping:
            raise RuntimeError(_CLOSED)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


_OWNER_CODES.add(BackgroundBlockObjectStore.put.__code__)
