"""A small, plain strict store written independently of auxstore and auxspec,
with switches that plant one semantic bug each.

``make(bug)`` returns a store class; ``make(None)`` is the correct port, which
must conform, so a flagged bug is the bug and not the port.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

BUGS = (
    "evict-pinned",
    "no-read-refresh",
    "no-rollback",
    "terminal-reverse",
    "no-terminal-move",
    "first-payload-in-batch",
    "last-write-wins",
    "unprotected-batch",
    "evict-most-recent",
    "capacity-plus-one",
    "release-before-retain",
    "silent-over-release",
    "read-into-no-refresh",
    "open-after-close",
    "empty-text-batch",
)


class StoreError(RuntimeError):
    pass


StoreError.__name__ = "BlockObjectStoreError"  # what verify recognises, as for any port


class UnreferencedError(StoreError, KeyError):
    pass


def _listed(values: Any) -> list[Any]:
    """Any iterable but a str or bytes, as a list (the Python binding's rule)."""
    if isinstance(values, (str, bytes, bytearray)) or not hasattr(values, "__iter__"):
        raise TypeError(f"expected a list, got {type(values).__name__}")
    return list(values)


def _keys(values: Any) -> list[str]:
    keys = _listed(values)
    if not all(isinstance(k, str) for k in keys):
        raise TypeError("bad key")
    return keys


class ReentrantCallError(StoreError):
    """A call made from caller code (a key iterable, say) while another call
    of the same store runs: refused, nothing changed (semantics.md section 12)."""


def _alone(method: Callable[..., Any]) -> Callable[..., Any]:
    """``method``, refused while another call of the same store runs."""

    @functools.wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        if self.running:
            raise ReentrantCallError(f"{method.__name__}() called while {self.running}() runs")
        self.running = method.__name__
        try:
            return method(self, *args, **kwargs)
        finally:
            self.running = ""

    return call


def make(bug: str | None) -> type:
    class Port:
        running = ""  # the public call under way, if any

        def __init__(self, *, max_bytes: Any, object_nbytes: Any) -> None:
            for size in (max_bytes, object_nbytes):
                if not isinstance(size, int) or isinstance(size, bool):
                    raise TypeError("sizes must be ints")
            if object_nbytes <= 0 or max_bytes < object_nbytes:
                raise ValueError("bad sizes")
            self.n = object_nbytes
            self.capacity = max_bytes // object_nbytes + (bug == "capacity-plus-one")
            self.lru: OrderedDict[str, bytes] = OrderedDict()
            self.refs: dict[str, int] = {}
            self.closed = False

        def _open(self) -> None:
            if self.closed and bug != "open-after-close":
                raise RuntimeError("closed")

        @_alone
        def put(self, objects: list[Any], *, retain_keys: Any = (), release_keys: Any = ()) -> None:
            self._open()
            if bug == "empty-text-batch" and isinstance(objects, (str, bytes)) and not objects:
                return  # iterated before it is checked: an empty str is an empty batch
            batch: dict[str, bytes] = {}
            for obj in _listed(objects):
                key, payload = getattr(obj, "key", None), getattr(obj, "payload", None)
                if not isinstance(key, str) or payload is None or isinstance(payload, str):
                    raise TypeError("bad key or payload")
                data = bytes(memoryview(payload))  # any buffer; raises TypeError for the rest
                if len(data) != self.n:
                    raise ValueError("bad payload length")
                if bug == "first-payload-in-batch" and key in batch:
                    continue
                batch[key] = data
            retains, releases = _keys(retain_keys), _keys(release_keys)
            refs = dict(self.refs)
            terminal: list[str] = []
            steps = [(k, -1) for k in releases] + [(k, 1) for k in retains]
            if bug != "release-before-retain":
                steps = steps[len(releases) :] + steps[: len(releases)]
            for key, delta in steps:
                count = refs.get(key, 0) + delta
                if count < 0:
                    if bug == "silent-over-release":
                        continue
                    raise UnreferencedError(f"{key!r} holds no reference")
                if count:
                    refs[key] = count
                else:
                    refs.pop(key, None)
                    terminal.append(key)
            lru = OrderedDict(self.lru)
            for key, payload in batch.items():
                if key in lru:
                    if bug == "last-write-wins":
                        lru[key] = payload
                    lru.move_to_end(key)
                else:
                    lru[key] = payload
            if bug != "no-terminal-move":
                for key in reversed(terminal) if bug == "terminal-reverse" else terminal:
                    if key in lru:
                        lru.move_to_end(key)
            protected = set() if bug == "unprotected-batch" else set(batch) - set(terminal)
            excess = len(lru) - self.capacity
            if excess > 0:
                order = list(lru)
                if bug == "evict-most-recent":
                    order.reverse()
                victims = [k for k in order if (bug == "evict-pinned" or k not in refs) and k not in protected][:excess]
                if len(victims) < excess:
                    if bug == "no-rollback":
                        self.refs, self.lru = refs, lru
                    raise StoreError("capacity")
                for key in victims:
                    del lru[key]
            self.refs, self.lru = refs, lru

        def _read(self, keys: Any, refresh: bool) -> bytes:
            self._open()
            keys = _keys(keys)
            if any(k not in self.lru for k in keys):
                raise StoreError("missing")
            data = b"".join(self.lru[k] for k in keys)
            if refresh:
                for key in keys:
                    self.lru.move_to_end(key)
            return data

        @_alone
        def get_concatenated(self, keys: Any) -> bytes:
            return self._read(keys, bug != "no-read-refresh")

        @_alone
        def read_into(self, keys: Any, buffer: Any) -> int:
            self._open()
            view = memoryview(buffer)
            if view.readonly or not view.c_contiguous:
                raise TypeError("read-only or non-contiguous buffer")
            keys = _keys(keys)
            if any(k not in self.lru for k in keys):
                raise StoreError("missing")
            if len(keys) * self.n > view.nbytes:
                raise ValueError("buffer too small")
            data = self._read(keys, bug != "read-into-no-refresh")
            view.cast("B")[: len(data)] = data
            return len(data)

        @_alone
        def close(self) -> None:
            self.closed = True
            self.lru.clear()
            self.refs.clear()

        def snapshot(self) -> Any:
            from auxstore import StoreSnapshot

            if self.closed:
                return StoreSnapshot((), (), True)
            return StoreSnapshot(tuple(self.lru.items()), tuple(sorted(self.refs.items())), False)

    Port.__name__ = f"Port_{bug or 'correct'}".replace("-", "_")
    return Port
