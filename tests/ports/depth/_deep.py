"""A strict store written for long lives, from the design brief: every call
costs in proportion to its own size (no copy of the whole state per put, as
``../subtle/_plain.py`` makes), with ``stats()`` and the observations. Each
depth port overrides one hook and plants one bug that shows only deep into
a store's life; ``DeepStore`` itself conforms (``../rewrites`` holds the
deep rewrites built on it).

Layout: ``_plain.PlainStore``'s arena, slot list, key -> slot
``OrderedDict`` in recency order and count dict, its argument checks and
its one-call-at-a-time guard; a put is decided (victims found, or a capacity
error) before anything changes, so a strict error changes nothing.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "subtle"))

from _plain import (
    NEW,
    CapacityError,
    MissingKeyError,
    PlainStore,
    UnreferencedKeyError,
    str_keys,
)

from auxstore import StoreSnapshot, StoreStats


class DeepStore(PlainStore):
    """Strict and outcome-equivalent to the spec, O(call) per call."""

    def __init__(self, *, max_bytes: Any, object_nbytes: Any) -> None:
        super().__init__(max_bytes=max_bytes, object_nbytes=object_nbytes)
        self._hits = self._misses = self._evictions = self._failures = 0

    # ----------------------------------------------------------- hooks

    def _slot_of(self, key: str) -> int:
        return self._lru[key]

    def _retained(self, count: int) -> int:
        """A count after one more retain."""
        return count + 1

    def _find_victims(
        self, changed: dict[str, int], batch: dict[str, Any], terminal: list[str], excess: int
    ) -> list[str] | None:
        """The ``excess`` keys to evict (None: a capacity error), found
        without changing anything: untouched keys with no reference, least
        recent first, then the terminal keys in terminal order."""
        ending = set(terminal)
        victims: list[str] = []
        for key in self._lru:
            if key in batch or key in ending or changed.get(key, self._refs.get(key, 0)):
                continue
            victims.append(key)
            if len(victims) == excess:
                return victims
        for key in terminal:
            if key in self._lru or key in batch:
                victims.append(key)
                if len(victims) == excess:
                    return victims
        return None

    def _moved(self, key: str) -> None:
        """``key`` was stored or moved to the most-recent end."""

    def _choose(self, victims: list[str], protected: set[str]) -> list[str]:
        """The keys to evict, after the batch and terminal moves: ``victims``
        (found before anything changed, the spec's choice)."""
        return victims

    def _on_failure(self, batch: dict[str, Any], changed: dict[str, int]) -> None:
        """A put failed for capacity: nothing changes but the count."""
        self._failures += 1

    def _apply_counts(self, changed: dict[str, int]) -> None:
        for key, count in changed.items():
            if count:
                self._refs[key] = count
            else:
                self._refs.pop(key, None)

    def _moved_terminal(self, terminal: list[str]) -> None:
        for key in terminal:
            if key in self._lru:
                self._lru.move_to_end(key)
                self._moved(key)

    def _touch(self, keys: list[str]) -> None:
        for key in keys:
            self._lru.move_to_end(key)
            self._moved(key)

    def _read(self, keys: list[str]) -> bytes:
        return b"".join([self._read_slot(self._slot_of(k)) for k in keys])

    def _after_read(self, keys: list[str]) -> None:
        self._touch(keys)
        self._hits += len(keys)

    def _after_put(self, evicted: int) -> None:
        self._evictions += evicted

    def _stats_of(self) -> tuple[int, int, int, int]:
        return self._hits, self._misses, self._evictions, self._failures

    # ------------------------------------------------------------- API

    def put(self, objects: Any, *, retain_keys: Any = (), release_keys: Any = ()) -> None:
        self._check_open()
        batch = self._dedup(self._batch(objects))
        retains = [self._key(k) for k in str_keys(retain_keys, "retain_keys")]
        releases = [self._key(k) for k in str_keys(release_keys, "release_keys")]
        changed: dict[str, int] = {}
        for key in retains:
            changed[key] = self._retained(changed.get(key, self._refs.get(key, 0)))
        terminal: list[str] = []
        for key in releases:
            count = changed.get(key, self._refs.get(key, 0)) - 1
            if count < 0:
                raise UnreferencedKeyError(f"release of {key!r}, which holds no reference")
            changed[key] = count
            if not count:
                terminal.append(key)
        lru = self._lru
        excess = len(lru) + sum(1 for key in batch if key not in lru) - self._cap
        victims: list[str] = []
        if excess > 0:
            found = self._find_victims(changed, batch, terminal, excess)
            if found is None:
                self._on_failure(batch, changed)
                raise CapacityError(f"cannot fit the batch in {self._cap} objects")
            victims = found
        self._apply_counts(changed)
        for key in batch:
            if key in lru:
                lru.move_to_end(key)
            else:
                lru[key] = NEW
            self._moved(key)
        self._moved_terminal(terminal)
        if victims:
            victims = self._choose(victims, set(batch) - set(terminal))
        for key in victims:
            slot = lru.pop(key)
            if slot != NEW:
                self._release_slot(slot)
        for key, payload in batch.items():
            if lru.get(key) == NEW:
                slot = self._alloc()
                self._write_slot(slot, payload)
                lru[key] = slot
        self._after_put(len(victims))

    def _stored(self, keys: Any) -> list[str]:
        wanted = [self._key(k) for k in str_keys(keys, "keys")]
        for key in wanted:
            if key not in self._lru:
                self._misses += 1
                raise MissingKeyError(f"{key!r} is not stored")
        return wanted

    def get_concatenated(self, keys: Any) -> bytes:
        self._check_open()
        wanted = self._stored(keys)
        data = self._read(wanted)
        self._after_read(wanted)
        return data

    def read_into(self, keys: Any, buffer: Any) -> int:
        self._check_open()
        view = self._target(buffer)
        wanted = self._stored(keys)
        if len(wanted) * self.object_nbytes > self._room(view):
            raise ValueError("buffer too small")
        written = self._fill(view, self._read(wanted))
        self._after_read(wanted)
        return written

    def snapshot(self) -> StoreSnapshot:
        if self._closed:
            return StoreSnapshot((), (), True)
        entries = tuple((k, self._read_slot(self._slot_of(k))) for k in self._lru)
        return StoreSnapshot(entries, tuple(sorted(self._refs.items())), False)

    # ----------------------------------------------------- observations

    def stats(self) -> StoreStats:
        self._check_open()
        pinned = sum(1 for key in self._refs if key in self._lru)
        hits, misses, evictions, failures = self._stats_of()
        return StoreStats(len(self._lru), self._cap, pinned, hits, misses, evictions, failures)

    def flush(self) -> None:
        self._check_open()

    def __len__(self) -> int:
        self._check_open()
        return len(self._lru)

    def __contains__(self, key: object) -> bool:
        self._check_open()
        return isinstance(key, str) and self._key(key) in self._lru

    def __enter__(self) -> DeepStore:
        self._check_open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


BlockObjectStore = DeepStore
