"""A port as a port author might write one: its own exception classes (none
a subclass of the ones auxspec recognises by shape), no ``snapshot()``, no
``read_into`` and no observations. It wraps auxstore for its behaviour, so it
conforms; ``MYPORT_BUG=1`` plants a bug (the second object of a two-object
batch is dropped). tests/test_pytest_plugin.py and tests/test_packaging.py run
pytest on it with the three-line test file of docs/verifying-a-port.md."""

from __future__ import annotations

import os
from typing import Any

import auxstore


class StoreError(Exception):
    pass


class Full(StoreError):
    pass


class NoSuchKey(StoreError):
    pass


class NotPinned(StoreError):
    pass


class Closed(StoreError):
    pass


_MAP: tuple[tuple[type[Exception], type[StoreError]], ...] = (
    (auxstore.CapacityError, Full),
    (auxstore.MissingKeyError, NoSuchKey),
    (auxstore.UnreferencedKeyError, NotPinned),
)
PLANTED = os.environ.get("MYPORT_BUG") == "1"


def _translated(call: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return call(*args, **kwargs)
    except RuntimeError as error:
        for theirs, ours in _MAP:
            if isinstance(error, theirs):
                raise ours(str(error)) from None
        if "closed" in str(error):
            raise Closed(str(error)) from None
        raise
    except KeyError as error:
        for theirs, ours in _MAP:
            if isinstance(error, theirs):
                raise ours(str(error)) from None
        raise


class Store:
    def __init__(self, *, max_bytes: Any, object_nbytes: Any) -> None:
        self._inner = auxstore.BlockObjectStore(max_bytes=max_bytes, object_nbytes=object_nbytes)
        self.object_nbytes = object_nbytes

    def put(self, objects: Any, *, retain_keys: Any = (), release_keys: Any = ()) -> None:
        if PLANTED and isinstance(objects, list) and len(objects) == 2:
            objects = objects[:1]  # the planted bug: the second object of a pair is dropped
        _translated(self._inner.put, objects, retain_keys=retain_keys, release_keys=release_keys)

    def get_concatenated(self, keys: Any) -> Any:
        return _translated(self._inner.get_concatenated, keys)

    def close(self) -> None:
        self._inner.close()
