"""Optional: copy many scattered slots into a caller's buffer in one call from C.

A scattered read in pure Python costs one slice assignment per key (a view,
a buffer export and a length check each). With numpy installed (the ``fast``
extra), ``numpy_gather()`` returns a function that copies every slot of a
chunk with one ``numpy.take`` over a 2-D ``uint8`` view of the chunk (one row
per slot) into the buffer viewed as rows; without numpy it returns None and
the store copies slot by slot. numpy is imported on the first large scattered
read, not with the package, so ``import auxstore`` stays as cheap as before.

Nothing here decides what a read returns, raises or moves: the store calls
the gather only after every key was found and the buffer's size checked, and
before any key moves, exactly where the pure copy runs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

# (chunk views, each chunk's first slot, object size, slots in read order,
# a 1-D unsigned-byte buffer of at least len(slots) * object size bytes)
Gather = Callable[[Sequence[memoryview], Sequence[int], int, list[int], memoryview], None]


@functools.cache
def numpy_gather() -> Gather | None:
    """The one-call gather, or None when numpy cannot be imported."""
    try:
        import numpy
    except ImportError:
        return None

    def gather(
        bases: Sequence[memoryview], starts: Sequence[int], nbytes: int, slots: list[int], out: memoryview
    ) -> None:
        rows_out = rows = None
        try:
            rows_out = numpy.frombuffer(out, dtype=numpy.uint8, count=len(slots) * nbytes).reshape(len(slots), nbytes)
            if len(bases) == 1:
                rows = numpy.frombuffer(bases[0], dtype=numpy.uint8).reshape(-1, nbytes)
                # mode="clip": every slot is in range (the store's own), and
                # numpy writes straight into `out` only when it need not check.
                numpy.take(rows, slots, axis=0, out=rows_out, mode="clip")
                return
            # Several chunks: each chunk's slots in one take, written to their
            # positions of the output (the keys of one read may sit in any chunk).
            wanted = numpy.asarray(slots, dtype=numpy.intp)
            for base, start in zip(bases, starts, strict=True):
                rows = numpy.frombuffer(base, dtype=numpy.uint8).reshape(-1, nbytes)
                here = (wanted >= start) & (wanted < start + len(rows))  # may select none: then a no-op
                rows_out[here] = numpy.take(rows, wanted[here] - start, axis=0, mode="clip")
        finally:
            # An array over the arena or the buffer holds an export of it until
            # it dies; an exception's traceback keeps this frame, so let go of
            # them here, or the store could not close nor the caller release.
            del rows_out, rows

    return gather
