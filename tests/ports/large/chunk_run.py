"""auxstore's store with one planted bug: a read's walk over runs of
consecutive slots takes a run to its last slot in the chunk where it
starts, so a run that crosses from one arena chunk into the next (auxstore's
first chunk is 1 GiB) comes back short. Every store under 1 GiB is one chunk
and unaffected; with objects of 1,000,003 bytes, a read of the keys in slots
1072 and 1073 (the slot that straddles 2^30) returns one object, not two.

Dimension: stores past 2^30 bytes (needs more than 1 GiB stored at once).
"""

from __future__ import annotations

from bisect import bisect_right
from itertools import compress, islice, pairwise
from operator import sub

from auxstore import BlockObjectStore as _Good

__all__ = ["BlockObjectStore"]


class BlockObjectStore(_Good):
    def _parts(self, slots: list[int]) -> list[memoryview]:
        if len(self._chunks) == 1:
            return super()._parts(slots)
        count, nbytes = len(slots), self._object_nbytes
        if not count:
            return []
        steps = map(sub, islice(slots, 1, None), slots)
        bounds = [0, *compress(range(1, count), map((1).__ne__, steps)), count]
        starts, bases = self._chunk_starts, self._bases
        parts = []
        for a, b in pairwise(bounds):
            first, last = slots[a], slots[b - 1]
            k = bisect_right(starts, first) - 1
            # The bug: the run is cut at the chunk's end without going on into the next chunk.
            parts.append(bases[k][(first - starts[k]) * nbytes : (last + 1 - starts[k]) * nbytes])
        return parts
