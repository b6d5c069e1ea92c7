"""Slot indices are kept in 16 bits when the arena offset is computed: a
store of more than 65,536 slots writes slot 65,536 over slot 0, so the key
in slot 0 reads back another key's bytes.

Family: counters that wrap (slot indices). Depth: a store of 65,537 slots, filled.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _deep import DeepStore

DIMENSION = "slots (slot index, 16 bits)"
PROFILE = "strict"
DRIVE = "python"


class BlockObjectStore(DeepStore):
    MASK = 0xFFFF

    def _write_slot(self, slot: int, data: Any) -> None:
        super()._write_slot(slot & self.MASK, data)

    def _read_slot(self, slot: int) -> bytes:
        return super()._read_slot(slot & self.MASK)
