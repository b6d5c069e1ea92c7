"""vLLM's store patched to reuse freed slots first-in first-out.

Snapshot vs spec: identical (slot numbers are not observable).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "subtle"))

from _vllm import vllm

PROFILE = "upstream"
DRIVE = "python"
SNAPSHOT = "identical (slot layout differs, not shown)"
BackgroundBlockObjectStore = vllm.BackgroundBlockObjectStore


class BlockObjectStore(vllm.BlockObjectStore):  # type: ignore[misc,name-defined]
    def _allocate_slot(self) -> int:
        if self._free_slots:
            slot: int = self._free_slots.pop(0)
            return slot
        slot = self._next_slot
        self._next_slot += 1
        return slot
