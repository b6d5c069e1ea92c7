"""Stores whose objects live in an outside engine (docs/remote.md).

The engine holds the objects and decides what to evict; the store keeps no
LRU and no reference counts, and follows the spec's ``remote`` profile: a
read returns every object with the payload of its last successful put or
fails whole, a put stores its whole batch or nothing. ``import
auxstore.remote`` needs nothing beyond the standard library; each store
imports its engine's client when it is built (``pip install auxstore[redis]``,
``pip install auxstore[mooncake]``); ``MooncakeBlockObjectStore`` and its
errors are imported on first use of their names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from auxstore.remote._errors import EngineError
from auxstore.remote._redis import REDIS_URL_VARIABLE, RedisBlockObjectStore

if TYPE_CHECKING:  # for type checkers; at run time __getattr__ imports them on first use
    from auxstore.remote._mooncake import MooncakeBlockObjectStore
    from auxstore.remote._mooncake_errors import MooncakeCapacityError, MooncakeError

__all__ = [
    "REDIS_URL_VARIABLE",
    "EngineError",
    "MooncakeBlockObjectStore",
    "MooncakeCapacityError",
    "MooncakeError",
    "RedisBlockObjectStore",
]

_LAZY = {
    "MooncakeBlockObjectStore": "auxstore.remote._mooncake",
    "MooncakeCapacityError": "auxstore.remote._mooncake_errors",
    "MooncakeError": "auxstore.remote._mooncake_errors",
}


def __getattr__(name: str) -> Any:
    """The Mooncake names, imported when first used (PEP 562)."""
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'auxstore.remote' has no attribute {name!r}")
