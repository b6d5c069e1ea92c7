"""Recency stamps from a 16-bit counter (wider for a store of more than
32,768 slots: twice the capacity's bits), renumbered before they wrap:
when the counter reaches its end every stored key is stamped again 1..n in
recency order and the counter goes on from n (the renumbering done right).

Snapshot vs spec: identical. Conforms at any depth.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _stamps import StampedStore

DIMENSION = "touches (recency stamps renumbered)"
PROFILE = "strict"
DRIVE = "python"
SNAPSHOT = "identical"


class BlockObjectStore(StampedStore):
    WRAP = 1 << 16
    RENUMBER = True
