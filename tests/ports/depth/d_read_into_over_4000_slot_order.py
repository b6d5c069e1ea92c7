"""``read_into`` of more than 4,000 objects copies them in slot order (one
pass over the arena) to consecutive places in the buffer: the bytes come
out in slot order instead of the order of the keys.

Family: a fast path above a call size skipping a duty (the order of copies).
Depth: read_into of 4,001 scattered objects.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _deep import DeepStore

DIMENSION = "read_into size (slot-order copy above 4,000)"
PROFILE = "strict"
DRIVE = "python"


class BlockObjectStore(DeepStore):
    BULK = 4_000

    def read_into(self, keys: Any, buffer: Any) -> int:
        self._check_open()
        view = self._target(buffer)
        wanted = self._stored(keys)
        if len(wanted) * self.object_nbytes > self._room(view):
            raise ValueError("buffer too small")
        if len(wanted) > self.BULK:
            data = b"".join(self._read_slot(slot) for slot in sorted(self._slot_of(k) for k in wanted))
        else:
            data = self._read(wanted)
        written = self._fill(view, data)
        self._after_read(wanted)
        return written
