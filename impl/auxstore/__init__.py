"""auxstore: vLLM's auxiliary-output store, strict and fast.

Drop-in for ``vllm.distributed.aux_output_connector.store``: the same names,
signatures and exception base classes, with every error leaving the store as
it was.
"""

from __future__ import annotations

from auxstore._background import BackgroundBlockObjectStore, WriterDiedError
from auxstore._errors import (
    BlockObjectStoreError,
    BrokenStoreError,
    CapacityError,
    MissingKeyError,
    ReentrantCallError,
    UnreferencedKeyError,
)
from auxstore._store import BlockObjectStore, InvariantError
from auxstore._types import BlockObject, StoreSnapshot, StoreStats

__all__ = [
    "BackgroundBlockObjectStore",
    "BlockObject",
    "BlockObjectStore",
    "BlockObjectStoreError",
    "BrokenStoreError",
    "CapacityError",
    "InvariantError",
    "MissingKeyError",
    "ReentrantCallError",
    "StoreSnapshot",
    "StoreStats",
    "UnreferencedKeyError",
    "WriterDiedError",
]
