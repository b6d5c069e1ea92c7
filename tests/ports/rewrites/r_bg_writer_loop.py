"""auxstore's background store with the writer loop and queue-full path of
tests/ports/subtle/_bg.py (the base of the buggy background ports), without
a bug.

Snapshot vs spec: identical (the inner store is auxstore's).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "subtle"))

from _bg import BlockObjectStore
from _bg import LoopStore as BackgroundBlockObjectStore

PROFILE = "strict"
DRIVE = "python"
SNAPSHOT = "identical"
__all__ = ["BackgroundBlockObjectStore", "BlockObjectStore"]
