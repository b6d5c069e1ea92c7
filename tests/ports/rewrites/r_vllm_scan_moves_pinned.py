"""vLLM's store patched so its eviction scan moves every pinned key it
passes to the most-recent end, so the next scan does not pass it again (the
optimization users ship against vLLM's O(pinned) eviction). Under strict no
call could see the difference; under upstream one can: an over-release drops
a count to zero and raises before any terminal move, so the key is evicted
from where it stood while pinned (tests/test_canonical.py shows the calls).
So `verify --profile upstream` flags it, rightly; the random ops of
tests/test_rewrites_agree.py never take that path.

Snapshot vs spec: pinned keys' order and position differ.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "subtle"))

from _vllm import vllm

PROFILE = "upstream"
DRIVE = "python"
SNAPSHOT = "pinned-key order differs"
BackgroundBlockObjectStore = vllm.BackgroundBlockObjectStore


class BlockObjectStore(vllm.BlockObjectStore):  # type: ignore[misc,name-defined]
    def _evict_to_fit(self, protected: set[str]) -> None:
        excess = len(self._lru) - self.num_slots
        if excess <= 0:
            return
        victims: list[str] = []
        passed: list[str] = []
        for key in self._lru:
            if key in protected:
                continue
            if key in self._references:
                passed.append(key)
                continue
            victims.append(key)
            if len(victims) == excess:
                break
        for key in passed:
            self._lru.move_to_end(key)
        if len(victims) != excess:
            raise vllm.BlockObjectStoreError(f"cannot fit the batch: limit={self.num_slots} objects")
        for victim in victims:
            slot = self._lru.pop(victim)
            if slot != self._UNALLOCATED_SLOT:
                self._free_slots.append(slot)
