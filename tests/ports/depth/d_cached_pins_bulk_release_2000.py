"""``stats().pinned`` is read from a cached count of pinned stored keys; a
put changing the counts of more than 2,000 keys takes a bulk path that does
not take the keys released to zero off the cached count, so after a release
of many keys at once ``stats().pinned`` is too high.

Family: a cached value missed on one rare path. Depth: 2,001 keys released to zero in one call.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _cached import CachedPinsStore

DIMENSION = "release list (cached pinned count above 2,000)"
PROFILE = "strict"
DRIVE = "python"


class BlockObjectStore(CachedPinsStore):
    BULK_SKIP = 2_000
