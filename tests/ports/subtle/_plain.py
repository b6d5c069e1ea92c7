"""A plain strict store written from DESIGN.md alone (not from auxstore or
auxspec), with small hook methods, so each subtle port in this folder
overrides one hook and plants one bug. ``PlainStore`` itself conforms.

Layout: a ``bytearray`` arena cut into fixed slots, a key -> slot
``OrderedDict`` in recency order (least recent first), a free-slot list, and a
key -> count dict. Every put plans its whole effect on copies and commits only
when nothing can fail any more (strict: an error changes nothing).
"""

from __future__ import annotations

import functools
import sys
from collections import OrderedDict
from typing import Any

from auxstore import StoreSnapshot


class BlockObjectStoreError(RuntimeError):
    """Capacity and missing-key errors (vLLM's class name, any module's)."""


class CapacityError(BlockObjectStoreError):
    pass


class MissingKeyError(BlockObjectStoreError):
    pass


class UnreferencedKeyError(BlockObjectStoreError, KeyError):
    def __str__(self) -> str:
        return RuntimeError.__str__(self)


class ReentrantCallError(BlockObjectStoreError):
    pass


API = ("put", "get_concatenated", "read_into", "close")


def one_call_at_a_time(method: Any) -> Any:
    """A public call, refused (nothing changed) when caller code it runs (a
    key generator, a payload property) calls the same store again; a
    subclass's own ``super().put(...)`` is the same call going on."""
    if getattr(method, "one_at_a_time", False):
        return method

    @functools.wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        running = self.__dict__.get("_running")
        if running is None:
            self._running = method.__name__
            try:
                return method(self, *args, **kwargs)
            finally:
                self._running = None
        if sys._getframe(1).f_locals.get("self") is not self:  # from caller code, not from the store's own method
            raise ReentrantCallError(f"{method.__name__}() called while {running}() runs on the same store")
        return method(self, *args, **kwargs)

    call.one_at_a_time = True  # type: ignore[attr-defined]
    return call


NEW = -1  # a batch key planned for insertion, no slot yet


def listed(values: Any, what: str) -> list[Any]:
    """Any iterable but str/bytes as a list (a str would iterate characters)."""
    if isinstance(values, (str, bytes, bytearray)) or not hasattr(values, "__iter__"):
        raise TypeError(f"{what} must be an iterable, not {type(values).__name__}")
    return list(values)


def str_keys(values: Any, what: str) -> list[str]:
    keys = listed(values, what)
    for key in keys:
        if not isinstance(key, str):
            raise TypeError(f"{what} must hold str keys, got {key!r}")
    return keys


class PlainStore:
    """Strict, outcome-equivalent to the spec; the hooks are the seams."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in API:  # a subclass's own public calls are guarded as the base's are
            if name in cls.__dict__:
                setattr(cls, name, one_call_at_a_time(cls.__dict__[name]))

    def __init__(self, *, max_bytes: Any, object_nbytes: Any) -> None:
        for name, size in (("max_bytes", max_bytes), ("object_nbytes", object_nbytes)):
            if not isinstance(size, int) or isinstance(size, bool):
                raise TypeError(f"{name} must be an int")
        if object_nbytes <= 0 or max_bytes < object_nbytes:
            raise ValueError("need object_nbytes > 0 and max_bytes >= object_nbytes")
        self.object_nbytes: int = object_nbytes
        # Not exposed as ``capacity``: a port need not report it.
        self._cap = self._capacity_of(max_bytes, object_nbytes)
        self._arena = bytearray(self._cap * self._stride())
        self._lru: OrderedDict[str, int] = OrderedDict()
        self._refs: dict[str, int] = {}
        self._free: list[int] = []
        self._next_slot = 0
        self._closed = False

    # ------------------------------------------------------------ hooks

    def _capacity_of(self, max_bytes: int, nbytes: int) -> int:
        return max_bytes // nbytes

    def _stride(self) -> int:
        return self.object_nbytes

    def _key(self, key: str) -> str:
        """The key as the store files it."""
        return key

    def _payload_of(self, payload: Any) -> Any:
        """What the store keeps of a caller's payload (a private copy)."""
        return bytes(memoryview(payload))

    def _write_slot(self, slot: int, data: Any) -> None:
        start = slot * self._stride()
        self._arena[start : start + self.object_nbytes] = data

    def _read_slot(self, slot: int) -> bytes:
        start = slot * self._stride()
        return bytes(self._arena[start : start + self.object_nbytes])

    def _alloc(self) -> int:
        if self._free:
            return self._free.pop()
        slot = self._next_slot
        self._next_slot += 1
        return slot

    def _release_slot(self, slot: int) -> None:
        self._free.append(slot)

    def _count(self, refs: dict[str, int], key: str) -> int:
        return refs.get(key, 0)

    def _retain_one(self, refs: dict[str, int], key: str) -> None:
        refs[key] = self._count(refs, key) + 1

    def _release_one(self, refs: dict[str, int], key: str, terminal: list[str]) -> None:
        count = self._count(refs, key) - 1
        if count < 0:
            raise UnreferencedKeyError(f"release of {key!r}, which holds no reference")
        if count:
            refs[key] = count
        else:
            refs.pop(key, None)
            terminal.append(key)

    def _dedup(self, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        """Dict semantics: first position, last payload."""
        return dict(pairs)

    def _victims(self, lru: OrderedDict[str, int], refs: dict[str, int], protected: set[str], excess: int) -> list[str]:
        victims: list[str] = []
        for key in lru:
            if key not in refs and key not in protected:
                victims.append(key)
                if len(victims) == excess:
                    break
        return victims

    def _move_terminal(self, lru: OrderedDict[str, int], terminal: list[str]) -> None:
        for key in terminal:
            if key in lru:
                lru.move_to_end(key)

    def _touch(self, keys: list[str]) -> None:
        for key in keys:
            self._lru.move_to_end(key)

    def _after_put(self, evicted: int) -> None:
        """Called after every successful put with the number of keys evicted."""

    # --------------------------------------------------------------- API

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("store is closed")

    def _batch(self, objects: Any) -> list[tuple[str, Any]]:
        pairs: list[tuple[str, Any]] = []
        for obj in listed(objects, "objects"):
            key, payload = getattr(obj, "key", None), getattr(obj, "payload", None)
            if not isinstance(key, str):
                raise TypeError(f"key {key!r} must be a str")
            if payload is None or isinstance(payload, str):
                raise TypeError("payload must be bytes-like")
            try:
                size = memoryview(payload).nbytes
            except TypeError:
                raise TypeError("payload must be bytes-like") from None
            if size != self.object_nbytes:
                raise ValueError(f"payload of {key!r} is {size} bytes, object_nbytes is {self.object_nbytes}")
            pairs.append((self._key(key), self._payload_of(payload)))
        return pairs

    def put(self, objects: Any, *, retain_keys: Any = (), release_keys: Any = ()) -> None:
        self._check_open()
        batch = self._dedup(self._batch(objects))
        retains = [self._key(k) for k in str_keys(retain_keys, "retain_keys")]
        releases = [self._key(k) for k in str_keys(release_keys, "release_keys")]
        refs = dict(self._refs)
        terminal: list[str] = []
        for key in retains:
            self._retain_one(refs, key)
        for key in releases:
            self._release_one(refs, key, terminal)
        lru = OrderedDict(self._lru)
        for key in batch:
            if key not in lru:
                lru[key] = NEW
            lru.move_to_end(key)
        self._move_terminal(lru, terminal)
        excess = len(lru) - self._cap
        victims: list[str] = []
        if excess > 0:
            victims = self._victims(lru, refs, set(batch) - set(terminal), excess)
            if len(victims) < excess:
                raise CapacityError(f"cannot fit the batch in {self._cap} objects")
        # Commit: nothing below fails.
        for key in victims:
            slot = lru.pop(key)
            if slot != NEW:
                self._release_slot(slot)
        for key, payload in batch.items():
            if lru.get(key) == NEW:
                slot = self._alloc()
                self._write_slot(slot, payload)
                lru[key] = slot
        self._refs, self._lru = refs, lru
        self._after_put(len(victims))

    def _stored(self, keys: Any) -> list[str]:
        wanted = [self._key(k) for k in str_keys(keys, "keys")]
        for key in wanted:
            if key not in self._lru:
                raise MissingKeyError(f"{key!r} is not stored")
        return wanted

    def get_concatenated(self, keys: Any) -> bytes:
        self._check_open()
        wanted = self._stored(keys)
        data = b"".join(self._read_slot(self._lru[k]) for k in wanted)
        self._touch(wanted)
        return data

    def _target(self, buffer: Any) -> memoryview:
        """The caller's buffer as a flat writable byte view, or TypeError."""
        try:
            view = memoryview(buffer)
        except TypeError:
            raise TypeError(f"buffer must be a writable buffer, not {type(buffer).__name__}") from None
        if view.readonly or not view.c_contiguous:
            raise TypeError("buffer must be writable and C-contiguous")
        return view.cast("B")

    def _room(self, view: memoryview) -> int:
        return view.nbytes

    def read_into(self, keys: Any, buffer: Any) -> int:
        self._check_open()
        view = self._target(buffer)
        wanted = self._stored(keys)
        total = len(wanted) * self.object_nbytes
        if total > self._room(view):
            raise ValueError("buffer too small")
        data = b"".join(self._read_slot(self._lru[k]) for k in wanted)
        self._touch(wanted)
        return self._fill(view, data)

    def _fill(self, view: memoryview, data: bytes) -> int:
        view[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self._closed = True
        self._lru.clear()
        self._refs.clear()
        self._free.clear()

    def snapshot(self) -> StoreSnapshot:
        if self._closed:
            return StoreSnapshot((), (), True)
        entries = tuple((k, self._read_slot(slot)) for k, slot in self._lru.items())
        return StoreSnapshot(entries, tuple(sorted(self._refs.items())), False)


for _name in API:
    setattr(PlainStore, _name, one_call_at_a_time(getattr(PlainStore, _name)))
BlockObjectStore = PlainStore
