"""Exception classes shared by the store, the background writer and the spec.

``BlockObjectStoreError`` keeps vLLM's name and base class (``RuntimeError``) so
code written against vLLM catches auxstore's errors unchanged. The subclasses
only narrow it; catching the base is always enough.
"""

from __future__ import annotations


class BlockObjectStoreError(RuntimeError):
    """An auxiliary-output object could not be stored or read."""


class CapacityError(BlockObjectStoreError):
    """A put needs more evictable room than the store has; nothing changed."""


class MissingKeyError(BlockObjectStoreError):
    """A read named a key that is not stored (never put, or evicted)."""


class UnreferencedKeyError(BlockObjectStoreError, KeyError):
    """A release named a key with no reference left.

    Also a ``KeyError``, because vLLM raises a bare ``KeyError`` here and callers
    written against vLLM may catch that.
    """

    def __str__(self) -> str:
        # KeyError.__str__ would quote the message like a repr; keep it readable.
        return RuntimeError.__str__(self)


class BrokenStoreError(BlockObjectStoreError):
    """An exception (``KeyboardInterrupt``, ``MemoryError``, ...) interrupted a
    call while it was changing the store and the change could not be
    completed, so the store's state is unknown: every later call raises this,
    naming the interrupted call. Make a new store."""


class ReentrantCallError(BlockObjectStoreError):
    """A call into a store from inside one of its own calls (from a key, a
    payload, a buffer, an iterable or a signal handler); it changed nothing."""


__all__ = [
    "BlockObjectStoreError",
    "BrokenStoreError",
    "CapacityError",
    "MissingKeyError",
    "ReentrantCallError",
    "UnreferencedKeyError",
]
