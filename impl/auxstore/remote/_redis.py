"""A block object store in a Redis server (the spec's ``remote`` profile).

Each object is one Redis string named ``auxstore:<length of the namespace>:<namespace>:<object_nbytes>:``
plus its key (UTF-8; lone surrogates kept with ``surrogatepass``, so distinct
keys stay distinct). A put is one ``MSET``, a read one ``MGET``: one round
trip each, and Redis runs each command whole, so a read sees every object of
a put or none of it, and no value is ever half written. The server's
``maxmemory`` and eviction policy decide what stays; a put Redis refuses for
memory (``OOM``) is a ``CapacityError`` and changed nothing.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

from auxstore._batch import check_batch, read_keys, type_name
from auxstore._errors import CapacityError, MissingKeyError
from auxstore._store import _size
from auxstore.remote._buffer import read_buffer
from auxstore.remote._errors import EngineError

REDIS_URL_VARIABLE = "AUXSTORE_REDIS_URL"


def _redis() -> Any:
    try:
        import redis
    except ImportError as error:
        raise ImportError("RedisBlockObjectStore needs the redis client: pip install 'auxstore[redis]'") from error
    return redis


class RedisBlockObjectStore:
    """The in-process store's API (``put``, ``get_concatenated``,
    ``read_into``, ``in``, ``close``) over a Redis server.

    ``url`` defaults to the environment variable ``AUXSTORE_REDIS_URL``;
    ``client`` (a ``redis.Redis``) is used instead when given, and is not
    closed by ``close()``. Stores with the same ``namespace`` and
    ``object_nbytes`` on one server share their objects (across processes);
    without one, each store gets a fresh namespace, so it sees only its own.
    ``max_bytes`` is checked as the in-process store checks it and bounds
    nothing: the server's ``maxmemory`` does. Retain and release keys are
    checked and otherwise ignored (the engine owns retention).
    """

    def __init__(
        self,
        max_bytes: int,
        object_nbytes: int,
        *,
        url: str | None = None,
        namespace: str | None = None,
        client: Any = None,
    ) -> None:
        max_bytes = _size("max_bytes", max_bytes)
        object_nbytes = _size("object_nbytes", object_nbytes)
        if object_nbytes <= 0:
            raise ValueError(f"auxiliary output object size must be positive: object_nbytes={object_nbytes}")
        if max_bytes < object_nbytes:
            raise ValueError(f"max_bytes={max_bytes} < object_nbytes={object_nbytes}")
        if namespace is None:
            namespace = uuid.uuid4().hex
        elif type(namespace) is not str:
            raise TypeError(f"namespace must be a str, not {type_name(namespace)}")
        redis = _redis()
        self._errors: tuple[type[BaseException], ...] = (redis.RedisError,)
        # Redis answers "OOM ..." when maxmemory is reached and nothing can be evicted; the client raises this.
        self._refused: type[BaseException] = redis.exceptions.OutOfMemoryError
        self._owns_client = client is None
        if client is None:
            url = url if url is not None else os.environ.get(REDIS_URL_VARIABLE)
            if not url:
                raise EngineError(f"no Redis server: pass url= or set {REDIS_URL_VARIABLE} (redis://host:port/db)")
            client = redis.Redis.from_url(url)
        self._client: Any = client
        self._object_nbytes = object_nbytes
        # The namespace's length first, so that no namespace, size and key can spell another's.
        space = namespace.encode("utf-8", "surrogatepass")
        self._prefix = b"auxstore:%d:%s:%d:" % (len(space), space, object_nbytes)
        self._closed = False

    @property
    def object_nbytes(self) -> int:
        return self._object_nbytes

    def _name(self, key: str) -> bytes:
        """The engine's name for ``key`` (UTF-8; a lone surrogate kept)."""
        return self._names([key])[0]

    def _check_open(self, call: str) -> None:
        if self._closed:
            raise RuntimeError(f"{call}() on a closed RedisBlockObjectStore")

    # ------------------------------------------------------------------- put

    def put(self, objects: Any, *, retain_keys: Any = (), release_keys: Any = ()) -> None:
        """Store the whole batch (last payload of a repeated key wins, and a
        put replaces an earlier payload), or raise and store none of it."""
        self._check_open("put")
        batch = check_batch(objects, retain_keys, release_keys, object_nbytes=self._object_nbytes)
        if not batch.objects:
            return
        named = dict(zip(self._names(list(batch.objects)), batch.objects.values(), strict=True))
        try:
            self._client.mset(named)
        except self._errors as error:
            if isinstance(error, self._refused):
                raise CapacityError(f"Redis refused a batch of {len(named)} objects for memory: {error}") from error
            raise EngineError(f"Redis failed a put of {len(named)} objects: {error}") from error

    # ----------------------------------------------------------------- reads

    def get_concatenated(self, keys: Any) -> bytes:
        """The payloads of ``keys`` joined in order, or ``MissingKeyError`` if
        any of them is not stored (then nothing is returned)."""
        self._check_open("get_concatenated")
        wanted = read_keys(keys)
        if not wanted:
            return b""
        return b"".join(self._fetch(wanted))

    def read_into(self, keys: Any, buffer: Any) -> int:
        """``get_concatenated`` written at the start of ``buffer`` (any
        writable C-contiguous buffer); the number of bytes written. A buffer
        too short is a ValueError before the server is asked."""
        self._check_open("read_into")
        wanted = read_keys(keys)
        total = self._object_nbytes * len(wanted)
        with read_buffer(buffer, len(wanted), self._object_nbytes) as view:
            if not wanted:
                return 0
            payloads = self._fetch(wanted)
            with view.cast("B") as flat:
                start = 0
                for payload in payloads:
                    flat[start : start + len(payload)] = payload
                    start += len(payload)
        return total

    def _names(self, keys: list[str]) -> list[bytes]:
        prefix = self._prefix
        try:
            return [prefix + key.encode() for key in keys]
        except UnicodeEncodeError:  # a lone surrogate: kept, so distinct keys stay distinct
            return [prefix + key.encode("utf-8", "surrogatepass") for key in keys]

    def _fetch(self, keys: list[str]) -> list[bytes]:
        """Every payload, in one ``MGET``; all or ``MissingKeyError``."""
        try:
            values: list[bytes] = self._client.mget(self._names(keys))
        except self._errors as error:
            raise EngineError(f"Redis failed a read of {len(keys)} objects: {error}") from error
        if None in values:
            missing = keys[values.index(None)]  # type: ignore[arg-type]
            raise MissingKeyError(f"auxiliary output object unavailable: {missing!r} (evicted, or never put)")
        nbytes = self._object_nbytes
        if set(map(type, values)) != {bytes} or set(map(len, values)) != {nbytes}:
            wrong = next(k for k, v in zip(keys, values, strict=True) if type(v) is not bytes or len(v) != nbytes)
            raise EngineError(f"Redis holds a value of another size or type under {wrong!r}: not written by this store")
        return values

    def __contains__(self, key: object) -> bool:
        """Whether ``key`` is stored now (the engine may evict it the next moment)."""
        self._check_open("__contains__")
        if not isinstance(key, str):
            return False
        try:
            return bool(self._client.exists(self._names([str.__str__(key)])[0]))
        except self._errors as error:
            raise EngineError(f"Redis failed to look up {key!r}: {error}") from error

    # ----------------------------------------------------------------- close

    def close(self) -> None:
        """Let go of the connection (idempotent). The objects stay on the server."""
        if self._closed:
            return
        self._closed = True
        if self._owns_client:
            try:
                self._client.close()
            except self._errors as error:
                raise EngineError(f"Redis failed to close the connection: {error}") from error

    def __enter__(self) -> RedisBlockObjectStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
