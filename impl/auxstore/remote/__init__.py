"""Stores whose objects live in an outside engine (docs/remote.md).

The engine holds the objects and decides what to evict; the store keeps no
LRU and no reference counts, and follows the spec's ``remote`` profile: a
read returns every object with the payload of its last successful put or
fails whole, a put stores its whole batch or nothing. ``import
auxstore.remote`` needs nothing beyond the standard library; each store
imports its engine's client when it is built (``pip install auxstore[redis]``).
"""

from __future__ import annotations

from auxstore.remote._errors import EngineError
from auxstore.remote._redis import REDIS_URL_VARIABLE, RedisBlockObjectStore

__all__ = ["REDIS_URL_VARIABLE", "EngineError", "RedisBlockObjectStore"]
