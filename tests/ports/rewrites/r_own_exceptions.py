"""The plain store raising a hierarchy of its own: its own
BlockObjectStoreError (a RuntimeError) with NoRoom, NotStored (also a
LookupError, not a KeyError) and OverRelease (also a KeyError) under it,
StoreClosed (a RuntimeError), BadInput (a TypeError) and BadSize (a
ValueError), all with other names than auxstore's.

Snapshot vs spec: identical.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "subtle"))

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import _plain

PROFILE = "strict"
DRIVE = "python"
SNAPSHOT = "identical"


class BlockObjectStoreError(RuntimeError):
    pass


class NoRoom(BlockObjectStoreError):
    pass


class NotStored(BlockObjectStoreError, LookupError):
    pass


class OverRelease(BlockObjectStoreError, KeyError):
    pass


class StoreClosed(RuntimeError):
    pass


class BadInput(TypeError):
    pass


class BadSize(ValueError):
    pass


_F = TypeVar("_F", bound=Callable[..., Any])
_MAP: list[tuple[type[BaseException], type[BaseException]]] = [
    (_plain.CapacityError, NoRoom),
    (_plain.MissingKeyError, NotStored),
    (_plain.UnreferencedKeyError, OverRelease),
    (RuntimeError, StoreClosed),
    (TypeError, BadInput),
    (ValueError, BadSize),
]


def _translated(method: _F) -> _F:
    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except Exception as error:
            for theirs, ours in _MAP:
                if isinstance(error, theirs):
                    raise ours(str(error)) from None
            raise

    return call  # type: ignore[return-value]


class BlockObjectStore(_plain.PlainStore):
    __init__ = _translated(_plain.PlainStore.__init__)
    put = _translated(_plain.PlainStore.put)
    get_concatenated = _translated(_plain.PlainStore.get_concatenated)
    read_into = _translated(_plain.PlainStore.read_into)
