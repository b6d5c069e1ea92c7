"""``stats().pinned`` read from a count of pinned stored keys kept on every
path (a count change of a stored key, a key stored already pinned, close),
instead of counted on each call: the cached count done right.

Snapshot vs spec: identical. Conforms at any depth.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _cached import CachedPinsStore

DIMENSION = "pinned keys (cached count)"
PROFILE = "strict"
DRIVE = "python"
SNAPSHOT = "identical"


class BlockObjectStore(CachedPinsStore):
    BULK_SKIP = None
