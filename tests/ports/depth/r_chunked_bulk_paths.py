"""Bulk paths done right: a read of more than 1,000 keys is served in
chunks of 333 (joined in order, each chunk's keys moved in order);
``read_into`` of more than 1,000 objects copies them in slot order, each
to its own key's place in the buffer; a release list of more than 1,000
keys is applied in chunks, the keys reaching zero moved in the order they
did.

Snapshot vs spec: identical. Conforms at any depth.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _deep import DeepStore

DIMENSION = "list sizes (chunked bulk paths)"
PROFILE = "strict"
DRIVE = "python"
SNAPSHOT = "identical"


class BlockObjectStore(DeepStore):
    BULK = 1_000
    CHUNK = 333

    def _read(self, keys: list[str]) -> bytes:
        if len(keys) <= self.BULK:
            return super()._read(keys)
        chunks = [keys[at : at + self.CHUNK] for at in range(0, len(keys), self.CHUNK)]
        return b"".join([DeepStore._read(self, chunk) for chunk in chunks])

    def _after_read(self, keys: list[str]) -> None:
        if len(keys) <= self.BULK:
            super()._after_read(keys)
            return
        for at in range(0, len(keys), self.CHUNK):
            super()._after_read(keys[at : at + self.CHUNK])

    def read_into(self, keys: Any, buffer: Any) -> int:
        self._check_open()
        view = self._target(buffer)
        wanted = self._stored(keys)
        size = self.object_nbytes
        if len(wanted) * size > self._room(view):
            raise ValueError("buffer too small")
        if len(wanted) <= self.BULK:
            written = self._fill(view, self._read(wanted))
        else:
            data = bytearray(len(wanted) * size)
            for slot, place in sorted((self._slot_of(k), at) for at, k in enumerate(wanted)):
                data[place * size : (place + 1) * size] = self._read_slot(slot)
            written = self._fill(view, bytes(data))
        self._after_read(wanted)
        return written

    def _moved_terminal(self, terminal: list[str]) -> None:
        chunk = self.CHUNK if len(terminal) > self.BULK else max(len(terminal), 1)
        for at in range(0, len(terminal), chunk):
            super()._moved_terminal(terminal[at : at + chunk])
