"""The checks of a remote store's ``read_into`` buffer, one for every engine."""

from __future__ import annotations

from auxstore._batch import type_name


def read_buffer(buffer: object, count: int, object_nbytes: int) -> memoryview:
    """A view of ``buffer`` that ``read_into`` of ``count`` objects may write:
    writable, C-contiguous and long enough, else TypeError or ValueError with
    nothing written (the view released). The caller releases the view (``with``)."""
    try:
        view = memoryview(buffer)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"buffer must be a writable buffer, not {type_name(buffer)}") from None
    total = object_nbytes * count
    problem: Exception | None = None
    if view.readonly:
        problem = TypeError(f"buffer of type {type_name(buffer)} is read-only")
    elif not view.c_contiguous:
        problem = TypeError("buffer is not C-contiguous")
    elif total > view.nbytes:
        problem = ValueError(f"buffer of {view.nbytes} bytes is too small: {count} objects need {total}")
    if problem is not None:
        view.release()
        raise problem
    return view
