"""``BlockObjectStore``: the strict production store.

Layout
------
Payloads live in an anonymous ``mmap`` arena cut into fixed slots. The arena
grows by chunks as slots are first needed (the first chunk up to 1 GiB, each
later one as big as all before it), so memory follows what is stored and any
``max_bytes`` is accepted, as the spec does. A slot is a plain int (no view
object per slot: that is most of what an object's bookkeeping cost). Slots
0 .. ``_made - 1`` are exactly the slots in use, one per stored key. A put
that evicts hands each victim's slot to one of its own new keys, in
ascending slot order, and takes fresh slots after the last one: so keys
written together sit in consecutive slots, and a batch that evicts an earlier
batch takes over its run. A read finds the runs of consecutive slots among
the keys it reads and copies each run with one slice (a prefix-cache hit,
keys read in the order they were written, is one copy); scattered keys cost
one view each.

Three plain structures hold the bookkeeping, one entry per stored key and
an int slot each (no per-key object of the store's own):

- ``_lru``: the stored keys with no reference (unpinned) -> slot number, least
  recent first. This is the eviction order.
- ``_pinned``: the stored keys with a reference -> slot number, in no
  particular order. Their relative order is not observable: a pinned key
  becomes evictable only when its count reaches zero, which makes it
  terminal and moves it to the most-recent end of ``_lru``
  (``auxspec.engine.observable``), so it is not kept.
- ``_refs``: key -> reference count >= 1; a key may be referenced before (or
  without) being stored.

``snapshot()`` shows exactly that observable form: the unpinned keys least
recent first, then the pinned keys sorted by key.

Why eviction is O(batch + evicted)
----------------------------------
A victim must have no reference, so eviction scans only ``_lru``, from its
least recent end. The only keys the scan passes over without taking them are
keys this very put names: batch keys (protected), keys its retains pin, and
keys its releases make terminal (those move to the most-recent end and are
considered after everything else). So a put scans at most ``len(batch) +
len(retain_keys) + len(release_keys) + evicted`` keys, however many keys are
pinned (vLLM scans past every pinned key at the old end on each put).

A key moves between the two tables in O(1): from ``_lru`` to ``_pinned``
when a retain pins it, back to the most-recent end of ``_lru`` when its count
reaches zero. A key referenced before it is stored goes straight into
``_pinned``. Reads and re-puts move an unpinned key to the most-recent end of
``_lru``; a pinned key stays where it is (where it is does not matter).

Strictness and exception safety
-------------------------------
Every call first validates all of its input and plans its whole effect (new
counts, terminal keys, victims, slots) without touching the store; only then
does it change anything. So every error leaves the store exactly as it was.
The change itself is idempotent and is completed before an exception that
interrupts it (``KeyboardInterrupt``, ``MemoryError``) propagates; see
``docs/reliability.md``. Which
inputs are accepted, which error wins when several apply, and which exception
each raises follow ``auxspec.reference.binding`` and the model's ``strict`` profile;
``tests/test_store_differential.py`` checks the agreement.
"""

from __future__ import annotations

import contextlib
import mmap
import sys
from bisect import bisect_right
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from itertools import accumulate, chain, compress, filterfalse, islice, pairwise, repeat
from operator import mul, sub
from types import CodeType, FrameType, TracebackType
from typing import NamedTuple, Protocol, TypeVar

from auxstore._batch import as_key, check_batch, read_keys, type_name
from auxstore._errors import (
    BrokenStoreError,
    CapacityError,
    MissingKeyError,
    ReentrantCallError,
    UnreferencedKeyError,
)
from auxstore._gather import numpy_gather
from auxstore._types import StoreSnapshot, StoreStats

__all__ = ["BlockObjectStore", "InvariantError"]

_CLOSED = "auxiliary output store is closed"
_CLOSED_GATE = "closed"
# Runs an iterator to exhaustion at C speed, keeping nothing.
_consume: Callable[[Iterable[object]], None] = deque[object](maxlen=0).extend
# Objects at least this big are copied one by one into read_into's buffer;
# smaller ones are joined first (a call per object costs more than a copy).
_COPY_EACH_MIN = 4096
# The arena's first chunk, and the least any chunk adds: big enough that a
# common store is one mapping (a store of several chunks takes the slower
# read paths, a bisect per run: at 64 MiB, vLLM's 20,000 6 KiB objects were
# two chunks, and their scattered reads 2-22% slower), small enough that a
# huge max_bytes costs nothing. An anonymous
# mapping takes memory only as its pages are written, so memory still follows
# what is stored; only the address space is reserved.
_FIRST_CHUNK_BYTES = 1 << 30
# A mostly scattered read_into of at least this many keys is copied by the
# optional one-call gather (auxstore._gather) when numpy is installed: below
# it, numpy's fixed cost per call (a few microseconds) outweighs the Python
# work per key it saves.
_GATHER_MIN_KEYS = 16
_NO_CHUNK = memoryview(b"")  # _base before the first chunk is mapped


class _Object(Protocol):
    """What a batch holds: auxstore's ``BlockObject``, vLLM's, or a port's."""

    @property
    def key(self) -> str: ...

    @property
    def payload(self) -> bytes: ...


class InvariantError(AssertionError):
    """The store's own bookkeeping is inconsistent: a bug in the store."""


def _size(name: str, value: object) -> int:
    """A size by value, as ``auxspec.reference.binding.as_size``: an ``int`` or a
    subclass's plain int value (``int.__index__`` reads the number itself; the
    subclass's own ``__index__``, ``__int__`` or arithmetic may lie); ``bool``
    is rejected (True as a size is always a caller's slip), and so is
    everything else, whatever its ``__class__`` claims."""
    kind = type(value)
    if kind is int:
        return value  # type: ignore[return-value]
    if issubclass(kind, int) and kind is not bool:
        return int.__index__(value)  # type: ignore[arg-type]
    raise TypeError(f"{name} must be an int, not {type_name(value)}")


class BlockObjectStore:
    """A bounded LRU store of fixed-size immutable objects with pins.

    Drop-in for vLLM's ``BlockObjectStore`` (same constructor, ``put``,
    ``get_concatenated`` and ``close``), with strict errors that change
    nothing, O(batch + evicted) eviction, and ``read_into``, ``len``, ``in``,
    ``stats``, ``snapshot``, ``flush`` and context-manager use on top. Used by
    one thread at a time; a call from inside another call (a key's
    ``__hash__``, a generator, a signal handler) raises ``ReentrantCallError``.
    """

    __slots__ = (
        "_allocated",
        "_arena",
        "_base",
        "_bases",
        "_capacity",
        "_capacity_failures",
        "_chunk_starts",
        "_chunks",
        "_dst_slices",
        "_evictions",
        "_gate",
        "_hits",
        "_lru",
        "_made",
        "_max_bytes",
        "_misses",
        "_object_nbytes",
        "_pinned",
        "_refs",
    )

    def __init__(self, *, max_bytes: int, object_nbytes: int) -> None:
        max_bytes = _size("max_bytes", max_bytes)
        object_nbytes = _size("object_nbytes", object_nbytes)
        if object_nbytes <= 0:
            raise ValueError(f"auxiliary output object size must be positive: object_nbytes={object_nbytes}")
        if max_bytes < object_nbytes:
            raise ValueError(
                f"auxiliary output store must fit at least one object: max_bytes={max_bytes} < "
                f"object_nbytes={object_nbytes}"
            )
        self._object_nbytes = object_nbytes
        self._max_bytes = max_bytes
        self._capacity = max_bytes // object_nbytes
        # The arena grows by chunks as slots are needed (each chunk as many
        # slots as all before it), so memory follows what is stored, not
        # max_bytes: any max_bytes is accepted, as in the spec. Nothing is
        # mapped before the first put that stores a key: a store whose one
        # object is 1 TiB costs nothing until that object is written.
        self._chunks: list[mmap.mmap] = []
        self._bases: list[memoryview] = []  # chunk i's whole view
        self._chunk_starts: list[int] = []  # chunk i's first slot
        self._allocated = 0  # slots the chunks hold
        self._arena: mmap.mmap | None = None  # the first chunk, once mapped; None again once closed
        self._base = _NO_CHUNK  # the first chunk's view (read only while it is the only chunk)
        self._made = 0  # slots 0.._made-1 are in use: one per stored key
        self._lru: OrderedDict[str, int] = OrderedDict()  # unpinned key -> slot number, least recent first
        self._pinned: dict[str, int] = {}  # pinned key -> slot number
        self._refs: dict[str, int] = {}
        self._hits = self._misses = self._evictions = self._capacity_failures = 0
        self._dst_slices: list[slice] = []  # read_into's target ranges of one object each, grown on demand
        # None: open and idle. Otherwise the call running ("put"), the call
        # changing the store ("put!": if no such call is running, it was
        # interrupted and the store is broken), or _CLOSED_GATE.
        self._gate: str | None = None

    # ----------------------------------------------------------- properties

    @property
    def object_nbytes(self) -> int:
        return self._object_nbytes

    @property
    def capacity(self) -> int:
        """The most objects the store holds: ``max_bytes // object_nbytes``."""
        return self._capacity

    @property
    def num_slots(self) -> int:
        """vLLM's name for ``capacity``."""
        return self._capacity

    def __repr__(self) -> str:
        """Profile, size and fill; never touches recency (usable at any time)."""
        head = f"BlockObjectStore(profile='strict', capacity={self._capacity}, object_nbytes={self._object_nbytes}"
        gate = self._gate
        if gate is _CLOSED_GATE:
            return f"{head}, closed)"
        pinned = len(self._pinned)
        state = f"stored={len(self._lru) + pinned}, pinned={pinned}, referenced={len(self._refs)}"
        if gate is not None and gate.endswith("!") and self._running_call(2) is None:
            state += f", broken by an interrupted {gate[:-1]}()"
        return f"{head}, {state})"

    # ----------------------------------------------------------------- gate

    def _blocked(self, call: str) -> None:
        """Why ``call`` cannot run now (the slow path of every call's entry
        check): closed, re-entrant, or broken. A mark left by a call that was
        interrupted outside its changes is stale, and cleared."""
        gate = self._gate
        if gate is None:
            return
        if gate is _CLOSED_GATE:
            raise RuntimeError(_CLOSED)
        running = self._running_call()
        if running is not None:
            raise ReentrantCallError(
                f"{call}() was called while {running}() is running on the same store (from a key, payload, "
                f"buffer, iterable or signal handler it uses); a store's calls cannot nest"
            )
        if gate.endswith("!"):
            raise BrokenStoreError(
                f"this store is broken: an exception interrupted {gate[:-1]}() while it was changing the store "
                f"and the change could not be completed; make a new store"
            )
        self._gate = None  # interrupted before or after its changes: the state is consistent

    def _running_call(self, depth: int = 3) -> str | None:
        """The name of a call of this store running further up the stack
        (the caller of the call that is checking, and its callers)."""
        # depth 3: _running_call <- _blocked <- the checking call <- its caller
        try:
            frame: FrameType | None = sys._getframe(depth)
        except ValueError:  # called with no Python caller at all
            return None
        while frame is not None:
            name = _GATED_CODES.get(frame.f_code)
            if name is not None and frame.f_locals.get("self") is self:
                return name
            frame = frame.f_back
        return None

    # ------------------------------------------------------------------ put

    def put(
        self,
        objects: Iterable[_Object],
        *,
        retain_keys: Iterable[str] = (),
        release_keys: Iterable[str] = (),
    ) -> None:
        """Apply pins, store the batch, move terminal keys, evict; all or nothing."""
        if self._gate is not None:
            self._blocked("put")
        self._gate = "put"
        try:
            # Validate and snapshot in the model's order (see auxstore._batch).
            # All caller code (iterators, properties, hashes) runs here.
            batch, retains, releases = check_batch(
                objects, retain_keys, release_keys, object_nbytes=self._object_nbytes
            )
            # The common put: only new keys, none of them referenced, no pins
            # changed. The victims are then simply the least recent unpinned
            # keys. (Its own method: the general plan's comprehensions make
            # cells of its locals, which every put would pay for.)
            refs = self._refs
            if (
                not retains
                and not releases
                and self._lru.keys().isdisjoint(batch)
                and (not refs or refs.keys().isdisjoint(batch))  # also not pinned: every pinned key is referenced
            ):
                self._put_simple(batch)
            else:
                self._put_general(batch, retains, releases)
        finally:
            if self._gate == "put":  # else "put!": interrupted and not completed, broken
                self._gate = None

    def _put_simple(self, batch: dict[str, bytes]) -> None:
        lru = self._lru
        count = len(batch)
        excess = len(lru) + len(self._pinned) + count - self._capacity
        if excess > 0:
            victims = list(islice(lru, excess))
            if len(victims) < excess:
                self._select_victims(excess, batch, {}, [])  # raises CapacityError, counted
            # Looked up by key: cheaper than walking lru.items() and splitting the pairs.
            slots = sorted(map(lru.__getitem__, victims))
        else:
            victims, slots = [], []
        made, growth = (self._made, None) if len(slots) == count else self._fresh_slots(slots, count)
        # A plain tuple, not a NamedTuple: its constructor is a Python call.
        self._commit(self._apply_simple_put, (batch, victims, slots, made, growth, self._evictions + len(victims)))

    def _put_general(self, batch: dict[str, bytes], retains: tuple[str, ...], releases: tuple[str, ...]) -> None:
        refs, lru, pinned = self._refs, self._lru, self._pinned
        # Plan the pins: the new count of every key they touch, and the keys
        # that reach zero, in the order they do.
        changed: dict[str, int] = {}
        terminal: list[str] = []
        if retains or releases:
            for key in retains:
                changed[key] = (changed[key] if key in changed else refs.get(key, 0)) + 1
            for key in releases:
                count = (changed[key] if key in changed else refs.get(key, 0)) - 1
                if count < 0:
                    raise UnreferencedKeyError(
                        f"release of {key!r}, which holds no reference (released more often than retained)"
                    )
                changed[key] = count
                if not count:
                    terminal.append(key)

        # Plan the eviction, and the slot of every new key.
        new_keys = list(filterfalse(lru.__contains__, batch))  # batch order
        if pinned:
            new_keys = list(filterfalse(pinned.__contains__, new_keys))
        excess = len(lru) + len(pinned) + len(new_keys) - self._capacity
        victims = self._select_victims(excess, batch, changed, terminal) if excess > 0 else []
        gone = set(victims) if victims and terminal else ()  # only a terminal key named by the put can be a victim
        if gone:
            new_keys = [key for key in new_keys if key not in gone]
        # Freed slots in ascending order, then fresh ones: a batch that evicts
        # an earlier batch takes over its run of slots, so keys written
        # together stay contiguous and a read of them is one copy.
        if not gone:
            slots = sorted(map(lru.__getitem__, victims))  # every victim is a stored unpinned key
        else:  # a terminal victim may still be pinned, or a new batch key with no slot
            slots = sorted(slot for slot in map(pinned.get, victims, map(lru.get, victims)) if slot is not None)
        made, growth = self._fresh_slots(slots, len(new_keys))
        self._commit(
            self._apply_put,
            _PutPlan(
                batch,
                changed,
                [(key, lru[key]) for key, count in changed.items() if count and key in lru],
                [(key, pinned[key]) for key in terminal if key in pinned and key not in gone],
                # Stored after the batch step (stored before, or a batch key) and not evicted.
                [key for key in terminal if (key in lru or key in pinned or key in batch) and key not in gone],
                victims,
                dict(zip(new_keys, slots, strict=True)),  # evicting frees no more slots than new keys take
                slots,
                made,
                growth,
                self._evictions + len(victims),
            ),
        )

    def _fresh_slots(self, slots: list[int], count: int) -> tuple[int, _Growth | None]:
        """Add fresh slots after the last one in use to ``slots`` (the freed
        ones) until it holds ``count``; the slots in use after, and the chunks
        to map for them (None: no new chunk)."""
        made = self._made
        if count <= len(slots):
            return made, None
        end = made + count - len(slots)
        growth = None
        if end > self._allocated:
            growth = _Growth.plan(self._allocated, end, self._capacity, self._object_nbytes, len(self._chunks))
        slots += range(made, end)
        return end, growth

    def _commit(self, apply: Callable[[_P], None], plan: _P) -> None:
        # Apply. An exception in the middle (a signal, MemoryError) completes
        # the apply, which is idempotent, before it propagates; if that fails
        # too, the "put!" mark stays and the store is broken. (The mark is
        # set inside the try: an exception just before it changed nothing.)
        try:
            self._gate = "put!"
            apply(plan)
            self._gate = "put"
        except BaseException:
            self._gate = "put!"
            apply(plan)
            self._gate = "put"
            raise

    def _apply_simple_put(self, plan: _SimplePlan) -> None:
        """``_apply_put`` for a plan that only adds new unpinned keys (and
        evicts unpinned stored keys), at C speed per key. Idempotent: the
        victims' removal ignores keys already gone, the copies repeat, and the
        insert is the last step that changes the order, the batch's keys in
        batch order appended after any of them a partial run appended."""
        batch, victims, slots, made, growth, evictions = plan
        lru = self._lru
        if victims:
            _consume(map(lru.pop, victims, repeat(None)))
        if growth is not None:
            self._grow(growth)
        if len(self._chunks) == 1:
            # A plain loop: a slice assignment as a statement is cheaper than
            # calling the view's __setitem__ through map.
            nbytes = self._object_nbytes
            base = self._base
            for start, payload in zip(map(mul, slots, repeat(nbytes)), batch.values()):  # noqa: B905
                base[start : start + nbytes] = payload
        else:
            for slot, payload in zip(slots, batch.values()):  # noqa: B905
                self._slot_view(slot)[:] = payload
        # A loop, not OrderedDict.update: update first probes its argument
        # for .keys() (a failed attribute lookup), which costs more than the
        # loop for a batch of 16. (No strict=True on these zips: the plan
        # gives exactly one slot per batch key, and the keyword alone costs
        # a tenth of a microsecond per zip.)
        for key, slot in zip(batch, slots):  # noqa: B905
            lru[key] = slot
        self._made = made
        self._evictions = evictions

    def _apply_put(self, plan: _PutPlan) -> None:
        """Make the planned changes. Idempotent, from any state a partial run
        of itself leaves: every step sets a planned value (a key is added to
        its new table before it leaves the old one, so it is never in
        neither), or is a sequence of moves to the most-recent end (which
        gives the same order however often it is repeated)."""
        refs, lru, pinned = self._refs, self._lru, self._pinned
        for key, count in plan.counts.items():
            if count:
                refs[key] = count
            else:
                refs.pop(key, None)
        for key, slot in plan.pin:  # stored keys pinned from now on
            pinned[key] = slot
            lru.pop(key, None)
        for key, slot in plan.unpin:  # stored terminal keys: moved to the most-recent end below
            lru[key] = slot
            pinned.pop(key, None)
        if plan.growth is not None:
            self._grow(plan.growth)
        for key in plan.victims:
            lru.pop(key, None)  # absent for a new batch key evicted by its own put
            pinned.pop(key, None)  # a terminal key evicted while still pinned here
        slot_of = plan.slot_of
        nbytes = self._object_nbytes
        base = self._base if len(self._chunks) == 1 else None
        for key, payload in plan.batch.items():
            if key in slot_of:
                slot = slot_of[key]
                if base is not None:
                    base[slot * nbytes : (slot + 1) * nbytes] = payload
                else:
                    self._slot_view(slot)[:] = payload
                if key in refs:  # referenced before it was stored
                    pinned[key] = slot
                else:
                    lru[key] = slot
                    lru.move_to_end(key)  # a partial run may have added it already
            elif key in lru:  # stored, unpinned and not evicted: most recent (a pinned one stays)
                lru.move_to_end(key)
        for key in plan.terminal:
            lru.move_to_end(key)
        self._made = plan.made
        self._evictions = plan.evictions

    def _select_victims(
        self, excess: int, batch: dict[str, bytes], changed: dict[str, int], terminal: list[str]
    ) -> list[str]:
        """The ``excess`` least recent keys that will be unreferenced and
        unprotected, in eviction order, or CapacityError."""
        # Keys named by this put are passed over in _lru: batch keys are
        # protected, keys it pins are no longer evictable, and terminal keys
        # move to the most-recent end, where they are taken last.
        passed = batch.keys() | changed.keys() if changed else batch
        victims = list(islice(filterfalse(passed.__contains__, self._lru), excess))
        if len(victims) < excess and terminal:
            lru, pinned = self._lru, self._pinned
            for key in terminal:
                if key in lru or key in pinned or key in batch:
                    victims.append(key)
                    if len(victims) == excess:
                        break
        if len(victims) < excess:
            self._capacity_failures += 1
            kept = len(self._lru) + len(self._pinned) + excess - len(victims)
            # vLLM's phrase first (users search for it), then what auxstore knows.
            raise CapacityError(
                f"auxiliary output store cannot retain the requested batch: limit={self._capacity} objects; "
                f"{kept} would have to stay (too few unpinned, unprotected keys to evict; batch of {len(batch)} "
                f"keys); nothing was changed"
            )
        return victims

    def _slot_view(self, slot: int) -> memoryview:
        """A view of one slot's bytes, in whichever chunk holds it."""
        k = bisect_right(self._chunk_starts, slot) - 1
        offset = (slot - self._chunk_starts[k]) * self._object_nbytes
        return self._bases[k][offset : offset + self._object_nbytes]

    def _parts(self, slots: list[int]) -> list[memoryview]:
        """Views covering ``slots`` in order, one per run of consecutive slots
        (keys written together are read with one copy). The run boundaries
        are found at C speed; Python works once per run."""
        count = len(slots)
        if not count:
            return []
        nbytes = self._object_nbytes
        first, last = slots[0], slots[-1]
        one_chunk = len(self._chunks) == 1
        if last - first == count - 1 and one_chunk and slots == list(range(first, last + 1)):
            return [self._base[first * nbytes : (last + 1) * nbytes]]  # a prefix hit: one run
        if one_chunk and _mostly_scattered(slots):  # then one view per key, at C speed
            base = self._base  # a comprehension: cheaper than base.__getitem__ through map
            return [base[start : start + nbytes] for start in map(mul, slots, repeat(nbytes))]
        steps = map(sub, islice(slots, 1, None), slots)
        bounds = [0, *compress(range(1, count), map((1).__ne__, steps)), count]
        if one_chunk:
            base = self._base
            return [base[slots[a] * nbytes : (slots[b - 1] + 1) * nbytes] for a, b in pairwise(bounds)]
        parts = []
        starts, bases = self._chunk_starts, self._bases
        ends = [*starts[1:], self._allocated]
        for a, b in pairwise(bounds):
            first, last = slots[a], slots[b - 1]
            while first <= last:  # a run may span chunks
                k = bisect_right(starts, first) - 1
                stop = min(last + 1, ends[k])
                parts.append(bases[k][(first - starts[k]) * nbytes : (stop - starts[k]) * nbytes])
                first = stop
        return parts

    def _grow(self, growth: _Growth) -> None:
        """Add the planned chunks; idempotent."""
        at = growth.first_chunk
        self._chunks[at:] = growth.chunks
        self._bases[at:] = growth.bases
        self._chunk_starts[at:] = growth.starts
        self._allocated = growth.allocated
        if at == 0:  # the first mapping of the store
            self._arena, self._base = self._chunks[0], self._bases[0]

    def _new_slot(self) -> int:
        """Put the next slot in use (for tests that build odd states)."""
        slot = self._made
        if slot >= self._allocated:
            self._grow(_Growth.plan(self._allocated, slot + 1, self._capacity, self._object_nbytes, len(self._chunks)))
        self._made = slot + 1
        return slot

    # ---------------------------------------------------------------- reads

    def get_concatenated(self, keys: list[str]) -> bytes:
        """The payloads of ``keys`` joined in order; each key then becomes most recent."""
        if self._gate is not None:
            self._blocked("get_concatenated")
        self._gate = "get_concatenated"
        try:
            keys = read_keys(keys)
            slots = self._slots(keys)
            data = b"".join(self._parts(slots))
            self._touch(keys, "get_concatenated")
            return data
        finally:
            if self._gate == "get_concatenated":
                self._gate = None

    def read_into(self, keys: list[str], buffer: object) -> int:
        """Write the payloads of ``keys``, joined, at the start of ``buffer`` (any
        writable C-contiguous buffer) and return the number of bytes written.

        Same recency effect as ``get_concatenated``; a buffer that is too small
        is a ValueError that changes nothing. With numpy installed (the
        ``fast`` extra), a large scattered read is copied in one call from C
        (``auxstore._gather``); what it returns, raises and moves is the same.
        """
        if self._gate is not None:
            self._blocked("read_into")
        self._gate = "read_into"
        try:
            return self._read_into_any(read_keys(keys), buffer)
        finally:
            if self._gate == "read_into":
                self._gate = None

    def _read_into_any(self, keys: list[str], buffer: object) -> int:
        if type(buffer) is bytearray:
            with memoryview(buffer) as view:  # a bytearray slice assignment would copy a view's bytes first
                return self._read_into(keys, view)
        try:
            view = memoryview(buffer)  # type: ignore[arg-type]
        except TypeError:
            raise TypeError(f"buffer must be a writable buffer, not {type_name(buffer)}") from None
        with view:
            if view.readonly:
                raise TypeError(f"buffer of type {type_name(buffer)} is read-only")
            if not view.c_contiguous:
                raise TypeError("buffer is not C-contiguous")
            if view.ndim == 1 and view.format == "B":
                return self._read_into(keys, view)
            with view.cast("B") as flat:
                return self._read_into(keys, flat)

    def _read_into(self, keys: list[str], target: memoryview) -> int:
        nbytes = self._object_nbytes
        total = nbytes * len(keys)
        slots = self._slots(keys)
        size = target.nbytes
        if total > size:
            raise ValueError(
                f"buffer of {size} bytes is too small for {len(keys)} objects of {nbytes} bytes ({total} bytes)"
            )
        if len(slots) >= _GATHER_MIN_KEYS and _mostly_scattered(slots) and (gather := numpy_gather()) is not None:
            gather(self._bases, self._chunk_starts, nbytes, slots, target)
            self._touch(keys, "read_into")
            return total
        parts = self._parts(slots)
        if len(parts) * _COPY_EACH_MIN > total:
            # Many small runs: one C-level join, then one copy, is cheaper
            # than a call per run, even though it copies twice.
            target[:total] = b"".join(parts)
        elif len(parts) == len(keys):  # one part per key: the target ranges are the same every time
            ranges = self._dst_slices
            if len(ranges) < len(keys):
                ranges.extend(slice(i * nbytes, (i + 1) * nbytes) for i in range(len(ranges), len(keys)))
            for where, part in zip(ranges, parts, strict=False):  # a plain loop: cheaper than __setitem__ in map
                target[where] = part
        else:
            ends = list(accumulate(map(len, parts)))
            _consume(map(target.__setitem__, map(slice, chain((0,), ends), ends), parts))
        self._touch(keys, "read_into")
        return total

    def _slots(self, keys: list[str]) -> list[int]:
        """The slot of each key, in order, or MissingKeyError (counted)."""
        lru, pinned = self._lru, self._pinned
        if not pinned:
            try:
                return list(map(lru.__getitem__, keys))
            except KeyError:
                pass
        else:
            found = list(map(pinned.get, keys, map(lru.get, keys)))
            if None not in found:
                return found  # type: ignore[return-value]
        self._misses += 1
        raise MissingKeyError(self._missing_message(keys)) from None

    def _touch(self, keys: list[str], call: str) -> None:
        """Move read keys to the most-recent end, in order; count the hits.
        Completed before an exception that interrupts it propagates (moves
        to the end are idempotent as a sequence; the count is planned)."""
        hits = self._hits + len(keys)
        mark = call + "!"
        try:
            self._gate = mark
            self._moves(keys, hits)
            self._gate = call
        except BaseException:
            self._gate = mark
            self._moves(keys, hits)
            self._gate = call
            raise

    def _moves(self, keys: list[str], hits: int) -> None:
        if self._pinned:  # every read key is stored: the unpinned ones are those in _lru
            lru = self._lru
            _consume(map(lru.move_to_end, filter(lru.__contains__, keys)))
        else:
            _consume(map(self._lru.move_to_end, keys))
        self._hits = hits

    def _missing_message(self, keys: Iterable[str]) -> str:
        lru, pinned = self._lru, self._pinned
        missing = next(key for key in keys if key not in lru and key not in pinned)
        return (
            f"auxiliary output object {missing!r} does not exist; the object may have been evicted or never "
            f"put (used={len(lru) + len(pinned)}, limit={self._capacity} objects). Increase "
            f"aux_output_config.max_bytes when a KV cache hit requires it."
        )

    # ---------------------------------------------------------- observation

    def __len__(self) -> int:
        if self._gate is not None:
            self._blocked("__len__")
        return len(self._lru) + len(self._pinned)

    def __contains__(self, key: object) -> bool:
        """Whether ``key`` is stored; recency does not change."""
        if self._gate is not None:
            self._blocked("__contains__")
        if type(key) is not str:
            if not issubclass(type(key), str):
                return False  # no other key is ever stored
            self._gate = "__contains__"  # its __hash__ is caller code
            try:
                key = as_key(key, "key")  # by value, as stored
            except TypeError:
                return False  # a key that cannot be hashed is never stored
            finally:
                if self._gate == "__contains__":
                    self._gate = None
        return key in self._lru or key in self._pinned

    def stats(self) -> StoreStats:
        """The counters (see ``StoreStats``); recency does not change."""
        if self._gate is not None:
            self._blocked("stats")
        return StoreStats(
            stored=len(self._lru) + len(self._pinned),
            capacity=self._capacity,
            pinned=len(self._pinned),
            hits=self._hits,
            misses=self._misses,
            evictions=self._evictions,
            capacity_failures=self._capacity_failures,
        )

    def snapshot(self) -> StoreSnapshot:
        """Everything observable, without touching recency (also after close,
        and on a broken store, where it shows what is left): the unpinned
        keys least recent first, then the pinned keys sorted by key (their
        relative order is not observable, so the store does not keep it)."""
        stored = chain(self._lru.items(), sorted(self._pinned.items()))
        return StoreSnapshot(
            entries=tuple((key, self._slot_view(slot).tobytes()) for key, slot in stored),
            references=tuple(sorted(self._refs.items())),
            closed=self._gate is _CLOSED_GATE,
        )

    def check_invariants(self) -> None:
        """Raise InvariantError describing the first inconsistency in the
        bookkeeping (usable after close as well)."""
        lru, pinned, refs, made = self._lru, self._pinned, self._refs, self._made
        if self._gate is _CLOSED_GATE:
            if lru or pinned or refs or made:
                raise InvariantError("a closed store still holds keys, references or slots")
            return
        capacity, nbytes = self._capacity, self._object_nbytes
        if capacity != self._max_bytes // nbytes:
            raise InvariantError(f"capacity {capacity} is not max_bytes // object_nbytes")
        if made > capacity:
            raise InvariantError(f"{made} slots allocated > capacity {capacity}")
        starts, chunks = self._chunk_starts, self._chunks
        ends = [*starts[1:], self._allocated] if starts else []
        if not chunks:  # nothing mapped yet: no slot either
            if starts or self._bases or self._arena is not None or self._allocated or made:
                raise InvariantError("the chunk table is inconsistent")
        elif starts[0] != 0 or self._arena is not chunks[0] or not len(starts) == len(chunks) == len(self._bases):
            raise InvariantError("the chunk table is inconsistent")
        for start, end, chunk, base in zip(starts, ends, chunks, self._bases, strict=True):
            if end <= start or len(chunk) != (end - start) * nbytes or base.obj is not chunk:
                raise InvariantError(f"the chunk of slots {start}..{end} is {len(chunk)} bytes")
        if self._allocated > capacity or made > self._allocated:
            raise InvariantError(f"{self._allocated} slots mapped for {made} made, capacity {capacity}")
        both = lru.keys() & pinned.keys()
        if both:
            raise InvariantError(f"keys {sorted(both)!r} are both pinned and unpinned")
        owner: dict[int, str] = {}
        for key, slot in chain(lru.items(), pinned.items()):
            if type(key) is not str:
                raise InvariantError(f"stored key {key!r} is not a str")
            if type(slot) is not int or not 0 <= slot < made:
                raise InvariantError(f"key {key!r} holds {slot!r}, which is not an allocated slot")
            if slot in owner:
                raise InvariantError(f"keys {owner[slot]!r} and {key!r} share slot {slot}")
            owner[slot] = key
        if len(owner) != made:
            raise InvariantError(f"{made - len(owner)} of {made} allocated slots hold no key")
        for key, count in refs.items():
            if type(key) is not str or type(count) is not int or count < 1:
                raise InvariantError(f"reference count {count!r} of {key!r} is not a positive int")
        referenced = [key for key in lru if key in refs]
        if referenced:
            raise InvariantError(f"keys {referenced!r} hold a reference but are listed as unpinned (evictable)")
        unreferenced = [key for key in pinned if key not in refs]
        if unreferenced:
            raise InvariantError(f"keys {unreferenced!r} are listed as pinned but hold no reference")

    # ------------------------------------------------------------ lifecycle

    def flush(self) -> None:
        """Nothing is pending in a synchronous store; only a closed (or broken) store fails."""
        if self._gate is not None:
            self._blocked("flush")

    def close(self) -> None:
        """Drop everything and unmap the arena; closing again does nothing."""
        gate = self._gate
        if gate is not None:
            if gate is _CLOSED_GATE:
                return
            self._blocked("close")
        # Completed before an interrupting exception propagates, like put.
        try:
            self._gate = "close!"
            self._release()
        except BaseException:
            self._gate = "close!"
            self._release()
            raise

    def _release(self) -> None:
        """Close's changes; idempotent."""
        self._lru.clear()
        self._pinned.clear()
        self._refs.clear()
        self._made = 0
        # Release every view first: mmap.close() fails while one is exported.
        for base in self._bases:
            base.release()
        for chunk in self._chunks:
            # A slot view made by a call that was interrupted may still be held
            # (by its traceback, say): then the mapping goes when that view does.
            with contextlib.suppress(BufferError):
                chunk.close()
        self._arena = None
        self._gate = _CLOSED_GATE

    def __enter__(self) -> BlockObjectStore:
        if self._gate is not None:
            self._blocked("__enter__")
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            self.close()
        except BrokenStoreError:
            if exc_type is None:
                raise
            # else the exception that broke the store is on its way: let it be the one seen


class _PutPlan(NamedTuple):
    """Everything a put changes, computed before it changes anything."""

    batch: dict[str, bytes]
    counts: dict[str, int]  # key -> new reference count (0: terminal)
    pin: list[tuple[str, int]]  # stored unpinned keys pinned from now on, with their slots
    unpin: list[tuple[str, int]]  # stored pinned keys made terminal and not evicted, with their slots
    terminal: list[str]  # stored terminal keys that are not victims, in terminal order
    victims: list[str]  # among them batch keys evicted by their own put
    slot_of: dict[str, int]  # new key -> its slot
    slots: list[int]  # the new keys' slots
    made: int  # slots in use after the put
    growth: _Growth | None  # chunks to add for new slots
    evictions: int


# A put of new unpinned keys only, no pins changed (``_apply_simple_put``):
# the batch, the victims (the oldest unpinned keys, in eviction order), the
# batch keys' slots in batch order, the slots in use after, the chunks to
# add, and the eviction count after.
_SimplePlan = tuple[dict[str, bytes], list[str], list[int], int, "_Growth | None", int]


_P = TypeVar("_P", _PutPlan, _SimplePlan)


class _Growth(NamedTuple):
    """Chunks to add to the arena, mapped but not yet part of it."""

    first_chunk: int  # the index the first of them gets
    starts: tuple[int, ...]
    chunks: tuple[mmap.mmap, ...]
    bases: tuple[memoryview, ...]
    allocated: int  # slots held once they are added

    @staticmethod
    def plan(allocated: int, needed: int, capacity: int, nbytes: int, first_chunk: int) -> _Growth:
        """Map chunks until ``needed`` slots are held: each chunk as big as
        all before it (at least _FIRST_CHUNK_BYTES), never past capacity."""
        starts: list[int] = []
        chunks: list[mmap.mmap] = []
        while allocated < needed:
            size = min(capacity - allocated, max(allocated, _FIRST_CHUNK_BYTES // nbytes, 1))
            try:
                chunk = mmap.mmap(-1, size * nbytes)
            except (OSError, OverflowError) as error:
                for made in chunks:
                    made.close()
                raise MemoryError(
                    f"auxiliary output store cannot map {size * nbytes} more bytes for {size} objects: {error}"
                ) from None
            starts.append(allocated)
            chunks.append(chunk)
            allocated += size
        return _Growth(first_chunk, tuple(starts), tuple(chunks), tuple(map(memoryview, chunks)), allocated)


def _mostly_scattered(slots: list[int]) -> bool:
    """Whether few neighbours among ``slots`` are consecutive (judged on a
    sample of at most 32 neighbour pairs: only speed depends on it)."""
    sample = range(0, len(slots) - 1, max(1, (len(slots) - 1) // 32))
    return sum(slots[i + 1] - slots[i] == 1 for i in sample) * 4 < len(sample)


# The calls that mark the gate, by code object: how _running_call recognises them on the stack.
_GATED_CODES: dict[CodeType, str] = {
    BlockObjectStore.put.__code__: "put",
    BlockObjectStore.get_concatenated.__code__: "get_concatenated",
    BlockObjectStore.read_into.__code__: "read_into",
    BlockObjectStore.close.__code__: "close",
    BlockObjectStore.__contains__.__code__: "__contains__",
}
