"""A strict store that keeps pinned keys out of the recency order: stored
keys with no reference live in an OrderedDict (least recent first), pinned
stored keys in a plain dict beside it, so eviction never scans a pinned key.
A pinned key has no recency at all: reads do not move it, and when its count
reaches zero it joins the evictable order at the most-recent end (where the
spec's terminal move puts it too).

Snapshot vs spec: pinned keys are listed after all unpinned ones, in the
order they were pinned, so pinned-key order and position differ.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "subtle"))

from collections import OrderedDict
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
SNAPSHOT = "pinned-key order differs"


class BlockObjectStore(PlainStore):
    def __init__(self, *, max_bytes: object, object_nbytes: object) -> None:
        super().__init__(max_bytes=max_bytes, object_nbytes=object_nbytes)
        self._data: dict[str, bytes] = {}
        self._cold: OrderedDict[str, None] = OrderedDict()
        self._hot: dict[str, None] = {}

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
        cold, hot = OrderedDict(self._cold), dict(self._hot)
        for key in [k for k in cold if k in refs]:
            del cold[key]
            hot[key] = None
        for key in [k for k in hot if k not in refs]:
            del hot[key]
            cold[key] = None  # it is terminal: placed below
        for key in batch:
            if key in refs:
                hot.setdefault(key, None)
            else:
                cold[key] = None
                cold.move_to_end(key)
        for key in terminal:
            if key in cold:
                cold.move_to_end(key)
        excess = len(cold) + len(hot) - self._cap
        victims: list[str] = []
        if excess > 0:
            protected = set(batch) - set(terminal)
            victims = [k for k in cold if k not in protected][:excess]
            if len(victims) < excess:
                raise CapacityError(f"cannot fit the batch in {self._cap} objects")
        for key in victims:
            del cold[key]
        data = {k: v for k, v in self._data.items() if k in cold or k in hot}
        for key, payload in batch.items():
            if key not in data and (key in cold or key in hot):
                data[key] = payload
        self._refs, self._cold, self._hot, self._data = refs, cold, hot, data

    def _stored(self, keys: Any) -> list[str]:
        wanted = str_keys(keys, "keys")
        for key in wanted:
            if key not in self._data:
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
            if key in self._cold:
                self._cold.move_to_end(key)

    def close(self) -> None:
        super().close()
        self._data.clear()
        self._cold.clear()
        self._hot.clear()

    def snapshot(self) -> StoreSnapshot:
        if self._closed:
            return StoreSnapshot((), (), True)
        order = list(self._cold) + list(self._hot)
        return StoreSnapshot(tuple((k, self._data[k]) for k in order), tuple(sorted(self._refs.items())), False)
