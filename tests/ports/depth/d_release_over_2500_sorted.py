"""A release list of more than 2,500 keys takes a bulk path that sorts the
keys (for locality) before moving the ones that reach zero: they reach the
most-recent end in key order instead of the order they reached zero.

Family: a fast path above a call size skipping a duty (the order of moves). Depth: 2,501 keys released to zero at once.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _deep import DeepStore

DIMENSION = "release list (bulk path's order above 2,500)"
PROFILE = "strict"
DRIVE = "python"


class BlockObjectStore(DeepStore):
    BULK = 2_500

    def _moved_terminal(self, terminal: list[str]) -> None:
        super()._moved_terminal(sorted(terminal) if len(terminal) > self.BULK else terminal)
