"""A block object store in Mooncake Store (the spec's ``remote`` profile,
with its ``partial_puts`` option).

Each object is one Mooncake object named ``auxstore:<length of the
namespace>:<namespace>:<object_nbytes>:`` plus its key (a key Mooncake cannot
take as UTF-8, one with a lone surrogate, is named ``auxstore-x:...:`` plus
the hex of its bytes, so distinct keys stay distinct), or by the bare key with
``namespace=""`` (as vLLM's ``MooncakeBlockObjectStore`` names them). A put is
``upsert_batch`` per chunk of at most ``max_batch_bytes``, a read
``batch_get_buffer`` per chunk, each buffer copied before its handle is let go.

What Mooncake does that shapes this store (docs/semantics.md section 13):
``put_batch`` of an existing key keeps the old payload and reports success,
so puts use ``upsert_batch``, which replaces it; a put refused for room
(``NO_AVAILABLE_HANDLE``, -200) may have published its batch's first objects,
and eviction runs behind the puts, so the same put may succeed a moment later;
a missing object reads as ``None``.
"""

from __future__ import annotations

import importlib
import os
import threading
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from auxstore._batch import check_batch, read_keys, type_name
from auxstore._errors import MissingKeyError
from auxstore._store import _size
from auxstore.remote._buffer import read_buffer
from auxstore.remote._errors import EngineError
from auxstore.remote._mooncake_errors import raise_for

MASTER_VARIABLE = "AUXSTORE_MOONCAKE_MASTER"  # host:port of mooncake_master's RPC
METADATA_VARIABLE = "AUXSTORE_MOONCAKE_METADATA"  # http://host:port/metadata (the master's embedded server)
SEGMENT_VARIABLE = "AUXSTORE_MOONCAKE_SEGMENT_BYTES"  # what this process lends the pool (Mooncake's minimum: 16 MiB)
DEFAULT_SEGMENT_BYTES = 16 << 20
DEFAULT_MAX_BATCH_BYTES = 16 << 20  # the default local buffer: a read's chunk must fit in it

_Result = TypeVar("_Result")
_clients: dict[tuple[str, str, int], Any] = {}
_clients_lock = threading.Lock()


def _store_class() -> Any:
    try:
        engine = importlib.import_module("mooncake.store")  # untyped, and absent from the base install
    except ImportError as error:
        raise ImportError(
            "MooncakeBlockObjectStore needs the Mooncake client: pip install 'auxstore[mooncake]' "
            "(and Debian's libibverbs1 and librdmacm1)"
        ) from error
    return engine.MooncakeDistributedStore


def connect(master: str, metadata: str, *, segment_bytes: int = DEFAULT_SEGMENT_BYTES) -> Any:
    """A new Mooncake client over TCP, lending ``segment_bytes`` to the pool."""
    client = _store_class()()
    code = client.setup("127.0.0.1", metadata, segment_bytes, DEFAULT_MAX_BATCH_BYTES, "tcp", "", master)
    raise_for("setup", code)
    return client


def shared_client() -> Any:
    """This process's client of the master the environment names (one per
    process: each client lends a segment to the pool, so one per store would
    grow the pool with every store)."""
    master, metadata = os.environ.get(MASTER_VARIABLE), os.environ.get(METADATA_VARIABLE)
    if not master or not metadata:
        raise EngineError(
            f"no Mooncake master: pass client=, or set {MASTER_VARIABLE} (host:port) and "
            f"{METADATA_VARIABLE} (http://host:port/metadata)"
        )
    segment = int(os.environ.get(SEGMENT_VARIABLE, DEFAULT_SEGMENT_BYTES))
    with _clients_lock:
        client = _clients.get((master, metadata, segment))
        if client is None:
            client = _clients[(master, metadata, segment)] = connect(master, metadata, segment_bytes=segment)
    return client


def close_shared_clients() -> None:
    """Close this process's shared clients (before their master stops: a
    client closed after it leaves errors in the log and waits on timeouts)."""
    with _clients_lock:
        clients = list(_clients.values())
        _clients.clear()
    for client in clients:
        client.close()


class MooncakeBlockObjectStore:
    """The in-process store's API (``put``, ``get_concatenated``,
    ``read_into``, ``in``, ``close``) over Mooncake Store.

    Built two ways. ``MooncakeBlockObjectStore(max_bytes, object_nbytes)``,
    as the in-process store: the process's shared client of the master that
    ``AUXSTORE_MOONCAKE_MASTER`` and ``AUXSTORE_MOONCAKE_METADATA`` name (or
    ``client=``, not closed by ``close()``), a fresh namespace unless one is
    given, payloads of exactly ``object_nbytes``. Or as vLLM's:
    ``MooncakeBlockObjectStore(client, object_nbytes=..., max_batch_bytes=...)``,
    which owns the client (``close()`` closes it), names objects by their bare
    keys, and takes payloads of 1 to ``object_nbytes`` bytes, read back as
    stored. ``max_bytes`` bounds nothing (the master's segments do); retain
    and release keys are checked and otherwise ignored.
    """

    def __init__(
        self,
        max_bytes: Any = None,
        object_nbytes: Any = None,
        *,
        max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
        namespace: str | None = None,
        client: Any = None,
    ) -> None:
        vllm_form = hasattr(max_bytes, "batch_get_buffer")
        if not vllm_form:  # both sizes' types before either's range, as the in-process store checks them
            max_bytes = _size("max_bytes", max_bytes)
        nbytes = _size("object_nbytes", object_nbytes)
        if nbytes <= 0:
            raise ValueError(f"auxiliary output object size must be positive: object_nbytes={nbytes}")
        max_batch_bytes = _size("max_batch_bytes", max_batch_bytes)
        if max_batch_bytes < nbytes:
            raise ValueError(f"max_batch_bytes={max_batch_bytes} < object_nbytes={nbytes}")
        if vllm_form:
            client, max_bytes = max_bytes, None
            namespace = "" if namespace is None else namespace
        elif max_bytes < nbytes:
            raise ValueError(f"max_bytes={max_bytes} < object_nbytes={nbytes}")
        if namespace is None:
            namespace = uuid.uuid4().hex
        elif type(namespace) is not str:
            raise TypeError(f"namespace must be a str, not {type_name(namespace)}")
        self._owns_client = vllm_form
        self._client: Any = client if client is not None else shared_client()
        self._object_nbytes = nbytes
        self._short_payloads = vllm_form  # vLLM's store takes the short tail of an output as one object
        self._chunk = max_batch_bytes // nbytes  # objects per engine call
        self._prefix = f"auxstore:{len(namespace)}:{namespace}:{nbytes}:" if namespace else ""
        self._closed = False

    @property
    def object_nbytes(self) -> int:
        return self._object_nbytes

    def _check_open(self, call: str) -> None:
        if self._closed:
            raise RuntimeError(f"{call}() on a closed MooncakeBlockObjectStore")

    def _names(self, keys: list[str]) -> list[str]:
        prefix = self._prefix
        names = [prefix + key for key in keys]
        try:
            "".join(names).encode()
        except UnicodeEncodeError:  # a lone surrogate: Mooncake takes UTF-8 only
            names = [self._escaped(key) for key in keys]
        return names

    def _escaped(self, key: str) -> str:
        try:
            key.encode()
        except UnicodeEncodeError:
            if not self._prefix:
                raise ValueError(f"Mooncake cannot name key {key!r} (not UTF-8) without a namespace") from None
            return "auxstore-x" + self._prefix[len("auxstore") :] + key.encode("utf-8", "surrogatepass").hex()
        return self._prefix + key

    # ------------------------------------------------------------------- put

    def put(self, objects: Any, *, retain_keys: Any = (), release_keys: Any = ()) -> None:
        """Store the whole batch (last payload of a repeated key wins, and a
        put replaces an earlier payload), or raise: ``CapacityError`` (a
        ``MooncakeCapacityError``) when Mooncake refused a chunk for room,
        after which the batch's earlier objects may be stored."""
        self._check_open("put")
        nbytes = None if self._short_payloads else self._object_nbytes
        batch = check_batch(objects, retain_keys, release_keys, object_nbytes=nbytes)
        if not batch.objects:
            return
        if nbytes is None and any(not 0 < len(p) <= self._object_nbytes for p in batch.objects.values()):
            raise ValueError(f"a payload is empty or longer than object_nbytes={self._object_nbytes}")
        names = self._names(list(batch.objects))
        payloads = list(batch.objects.values())
        upsert = self._client.upsert_batch
        step = self._chunk
        for start in range(0, len(names), step):
            raise_for("upsert_batch", upsert(names[start : start + step], payloads[start : start + step]), start)

    # ----------------------------------------------------------------- reads

    def get_concatenated(self, keys: Any) -> bytes:
        """The payloads of ``keys`` joined in order, or ``MissingKeyError`` if
        any of them is not stored (then nothing is returned)."""
        self._check_open("get_concatenated")
        wanted = read_keys(keys)
        if not wanted:
            return b""
        return self._fetch(wanted, b"".join)

    def read_into(self, keys: Any, buffer: Any) -> int:
        """``get_concatenated`` written at the start of ``buffer`` (any
        writable C-contiguous buffer); the number of bytes written. A buffer
        too short is a ValueError before Mooncake is asked."""
        self._check_open("read_into")
        wanted = read_keys(keys)
        with read_buffer(buffer, len(wanted), self._object_nbytes) as view:
            if not wanted:
                return 0
            with view.cast("B") as octets, octets.cast("b") as flat:  # the format Mooncake's buffers export

                def write(payloads: list[Any]) -> int:
                    position = 0
                    for payload in payloads:
                        end = position + len(payload)
                        flat[position:end] = payload
                        position = end
                    return position

                # _fetch calls write only once every object was found: a failed read writes nothing.
                return self._fetch(wanted, write)

    def _fetch(self, keys: list[str], use: Callable[[list[Any]], _Result]) -> _Result:
        """``use`` of every payload in order (buffers, valid during the call);
        all or ``MissingKeyError``, before ``use`` runs. Each name is asked
        once: ``batch_get_buffer`` given a name twice in one call hands back
        other objects' bytes (measured on 0.3.13: ``[a, a, b, b]`` read
        ``b, a, zeros, b``). A read of one chunk hands ``use`` Mooncake's own
        buffers, let go only after ``use`` copied them; a longer read copies
        each chunk out before the next one takes the local pool's slots."""
        names = self._names(keys)
        distinct = list(dict.fromkeys(names))
        get = self._client.batch_get_buffer
        step = self._chunk
        copy = len(distinct) > step
        low = 1 if self._short_payloads else self._object_nbytes
        high = self._object_nbytes
        found: dict[str, memoryview] = {}  # each of format "b", as Mooncake's buffers export it
        try:
            for start in range(0, len(distinct), step):
                chunk = distinct[start : start + step]
                handles = get(chunk)
                if len(handles) != len(chunk):
                    raise EngineError(f"Mooncake batch_get_buffer returned {len(handles)} buffers for {len(chunk)}")
                for name, handle in zip(chunk, handles, strict=True):
                    if handle is None:
                        key = keys[names.index(name)]
                        raise MissingKeyError(f"auxiliary output object unavailable: {key!r} (evicted, or never put)")
                    view = found[name] = memoryview(handle)
                    if not low <= view.nbytes <= high:
                        key, held = keys[names.index(name)], view.nbytes
                        raise EngineError(f"Mooncake holds {held} bytes under {key!r}: not written by this store")
                    # Copied out now when the next chunk takes the local pool's slots (or a stand-in
                    # client's buffer is not of Mooncake's format).
                    if copy or view.format != "b":
                        found[name] = memoryview(view.tobytes()).cast("b")
                        view.release()
                del handles
            return use([found[name] for name in names])
        finally:
            for view in found.values():
                view.release()

    def __contains__(self, key: object) -> bool:
        """Whether ``key`` is stored now (the engine may evict it the next moment)."""
        self._check_open("__contains__")
        if not isinstance(key, str):
            return False
        found = self._client.is_exist(self._names([str.__str__(key)])[0])
        if found < 0:
            raise_for("is_exist", found)
        return bool(found)

    # ----------------------------------------------------------------- close

    def close(self) -> None:
        """Let go of the store (idempotent). The objects stay in Mooncake; a
        client the store owns (the vLLM form) is closed."""
        if self._closed:
            return
        self._closed = True
        if self._owns_client:
            self._client.close()

    def __enter__(self) -> MooncakeBlockObjectStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
