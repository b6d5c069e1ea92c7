"""A strict store whose recency is a counter instead of an ordered dict:
every move stamps the key with the next value of an unbounded clock, and
eviction takes the unpinned, unprotected keys with the smallest stamps.

Snapshot vs spec: identical (entries sorted by stamp).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "subtle"))

from typing import Any

from _plain import (
    CapacityError,
    MissingKeyError,
    PlainStore,
    UnreferencedKeyError,
    str_keys,
)

from auxstore import StoreSnapshot

PROFILE = "strict"
DRIVE = "python"
SNAPSHOT = "identical"


class BlockObjectStore(PlainStore):
    def __init__(self, *, max_bytes: object, object_nbytes: object) -> None:
        super().__init__(max_bytes=max_bytes, object_nbytes=object_nbytes)
        self._stamp: dict[str, int] = {}
        self._data: dict[str, bytes] = {}
        self._clock = 0

    def put(self, objects: Any, *, retain_keys: Any = (), release_keys: Any = ()) -> None:
        self._check_open()
        batch = dict(self._batch(objects))
        retains = str_keys(retain_keys, "retain_keys")
        releases = str_keys(release_keys, "release_keys")
        refs = dict(self._refs)
        terminal: list[str] = []
        for key in retains:
            refs[key] = refs.get(key, 0) + 1
        for key in releases:
            count = refs.get(key, 0) - 1
            if count < 0:
                raise UnreferencedKeyError(f"release of {key!r}, which holds no reference")
            if count:
                refs[key] = count
            else:
                del refs[key]
                terminal.append(key)
        stamps = dict(self._stamp)
        clock = self._clock
        for key in [*batch, *(k for k in terminal if k in stamps or k in batch)]:
            clock += 1
            stamps[key] = clock
        excess = len(stamps) - self._cap
        victims: list[str] = []
        if excess > 0:
            protected = set(batch) - set(terminal)
            eligible = sorted((s, k) for k, s in stamps.items() if k not in refs and k not in protected)
            victims = [k for _, k in eligible[:excess]]
            if len(victims) < excess:
                raise CapacityError(f"cannot fit the batch in {self._cap} objects")
        for key in victims:
            del stamps[key]
            self._data.pop(key, None)
        for key, payload in batch.items():
            if key in stamps and key not in self._data:
                self._data[key] = payload
        self._refs, self._stamp, self._clock = refs, stamps, clock

    def _stored(self, keys: Any) -> list[str]:
        wanted = str_keys(keys, "keys")
        for key in wanted:
            if key not in self._stamp:
                raise MissingKeyError(f"{key!r} is not stored")
        return wanted

    def get_concatenated(self, keys: Any) -> bytes:
        self._check_open()
        wanted = self._stored(keys)
        data = b"".join(self._data[k] for k in wanted)
        self._touch(wanted)
        return data

    def read_into(self, keys: Any, buffer: Any) -> int:
        self._check_open()
        view = self._target(buffer)
        wanted = self._stored(keys)
        data = b"".join(self._data[k] for k in wanted)
        if len(data) > view.nbytes:
            raise ValueError("buffer too small")
        self._touch(wanted)
        view[: len(data)] = data
        return len(data)

    def _touch(self, keys: list[str]) -> None:
        for key in keys:
            self._clock += 1
            self._stamp[key] = self._clock

    def close(self) -> None:
        super().close()
        self._stamp.clear()
        self._data.clear()

    def snapshot(self) -> StoreSnapshot:
        if self._closed:
            return StoreSnapshot((), (), True)
        order = sorted(self._stamp, key=self._stamp.__getitem__)
        return StoreSnapshot(tuple((k, self._data[k]) for k in order), tuple(sorted(self._refs.items())), False)
