"""auxstore's store with one planted bug: a slot's byte offset is computed as
a signed 32-bit int (as ``int32_t offset = slot * object_nbytes`` would be in
C), so it wraps at 2^31. Every store under 2 GiB is unaffected; in a store of
objects of 1,000,003 bytes the first write to slot 2148 (the first slot
wholly past 2^31) lands nowhere, and the put that makes it fails.

Dimension: stores past 2^31 bytes (needs more than 2 GiB stored at once).
"""

from __future__ import annotations

from bisect import bisect_right

from auxstore import BlockObjectStore as _Good

__all__ = ["BlockObjectStore"]


def _int32(value: int) -> int:
    return (value + (1 << 31)) % (1 << 32) - (1 << 31)


class BlockObjectStore(_Good):
    def _slot_view(self, slot: int) -> memoryview:
        nbytes = self._object_nbytes
        k = bisect_right(self._chunk_starts, slot) - 1
        offset = _int32(slot * nbytes) - self._chunk_starts[k] * nbytes  # the bug: the global offset wraps
        return self._bases[k][offset : offset + nbytes]
