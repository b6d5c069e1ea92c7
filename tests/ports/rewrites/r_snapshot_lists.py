"""The plain store whose snapshot() holds lists where the spec's holds
tuples (entries and references as lists of [key, value] lists).

Snapshot vs spec: same content, lists instead of tuples.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "subtle"))

from _plain import PlainStore

from auxstore import StoreSnapshot

PROFILE = "strict"
DRIVE = "python"
SNAPSHOT = "same content, lists instead of tuples"


class BlockObjectStore(PlainStore):
    def snapshot(self) -> StoreSnapshot:
        entries, references, closed = super().snapshot()
        return StoreSnapshot([list(e) for e in entries], [list(r) for r in references], closed)  # type: ignore[arg-type]
