"""A put of more than 1,500 objects takes a bulk path that applies its
retains and releases first; when it then fails for capacity it takes back
the objects but not the counts (strict: a failed put changes nothing).

Family: a fast path above a call size skipping a duty (the rollback).
Depth: a failing put of 1,501 objects with retains.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _deep import DeepStore

DIMENSION = "batch size (bulk put's rollback above 1,500)"
PROFILE = "strict"
DRIVE = "python"


class BlockObjectStore(DeepStore):
    BULK = 1_500

    def _on_failure(self, batch: dict[str, Any], changed: dict[str, int]) -> None:
        super()._on_failure(batch, changed)
        if len(batch) > self.BULK:
            self._apply_counts(changed)
