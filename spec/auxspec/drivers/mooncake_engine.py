"""The Mooncake master a ``remote`` verify runs against, and the evictions verify adds
(a ``remote_engines.Engine``).

``auxspec verify --profile remote`` judges a store whose objects live in a
Mooncake Store pool: the master of ``AUXSTORE_MOONCAKE_MASTER`` (host:port of
its RPC service) with the metadata server of ``AUXSTORE_MOONCAKE_METADATA``
(``http://host:port/metadata``; the variables ``auxstore.remote`` reads too,
and a port process inherits). Verify reads the master's HTTP service
(``--metrics_port``; ``AUXSTORE_MOONCAKE_HTTP``, by default the master's host
at port 9003, mooncake_master's default) for two things: the objects the
master evicted (``master_evicted_key_count`` of ``/metrics``) and the names it
holds (``/get_all_keys``).

As for Redis (drivers.redis_engine), verify also deletes objects itself
before each call, seeded: each object the running trace's store wrote (a
name the master did not hold when the trace began) with probability
``RATE``, by ``remove`` through a client of its own that lends no memory. A
read leases its objects (semantics.md 13.1, M3): while the lease lasts the
master neither evicts nor removes them, so ``remove`` answers ``-706``
(``OBJECT_HAS_LEASE``) and the object stays; verify leaves it, as the master
would, and counts it. At the end of each trace the objects its store wrote
are removed past their leases: the pool is verify's scratch space.

The model options of section 13.1 are on: ``partial_puts`` (M4) and
``transient_misses`` (M10).
"""

from __future__ import annotations

import importlib
import random
import re
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from auxspec.drivers.remote_engines import EngineUnavailable

MASTER_VARIABLE = "AUXSTORE_MOONCAKE_MASTER"  # host:port of the master's RPC service (auxstore.remote reads it)
METADATA_VARIABLE = "AUXSTORE_MOONCAKE_METADATA"  # http://host:port/metadata (auxstore.remote reads it)
HTTP_VARIABLE = "AUXSTORE_MOONCAKE_HTTP"  # http://host:port of the master's --metrics_port
DEFAULT_HTTP_PORT = 9003  # mooncake_master's default --metrics_port
RATE = 0.2  # the chance that verify removes each of the trace's objects before a call
OBJECT_NOT_FOUND = -704  # removed already: the master evicted it first
OBJECT_HAS_LEASE = -706  # read a moment ago: the master keeps it until the lease ends (M3)
HTTP_SECONDS = 10.0
OPTIONS = ("partial_puts", "transient_misses")  # semantics.md 13.1: M4 and M10


def addresses(environ: Any) -> tuple[str, str, str]:
    """The master's RPC address, the metadata URL and the master's HTTP service.

    raises: EngineUnavailable"""
    master, metadata = environ.get(MASTER_VARIABLE, ""), environ.get(METADATA_VARIABLE, "")
    if not master or not metadata:
        raise EngineUnavailable(
            f"--profile remote on Mooncake needs {MASTER_VARIABLE} (host:port) and {METADATA_VARIABLE} "
            "(http://host:port/metadata); see docs/remote.md"
        )
    host = master.rsplit(":", 1)[0] or "127.0.0.1"
    http = environ.get(HTTP_VARIABLE, "") or f"http://{host}:{DEFAULT_HTTP_PORT}"
    return master, metadata, http.rstrip("/").removesuffix("/metrics")


def _client_class() -> Any:
    try:
        return importlib.import_module("mooncake.store").MooncakeDistributedStore  # untyped, an extra
    except ImportError as error:
        raise EngineUnavailable(
            f"--profile remote on Mooncake needs its client: pip install 'auxstore[mooncake]' ({error})"
        ) from None


@dataclass
class MooncakeEngine:
    """The master of ``AUXSTORE_MOONCAKE_MASTER`` (remote_engines.Engine)."""

    client: Any  # verify's own: it removes, and lends no memory to the pool
    address: str
    http: str
    name: str = "mooncake"
    options: tuple[str, ...] = OPTIONS
    counter: str = "objects (master_evicted_key_count)"

    @classmethod
    def connect(cls, environ: Any) -> MooncakeEngine:
        """raises: EngineUnavailable (one line)"""
        master, metadata, http = addresses(environ)
        engine = cls(None, master, http)
        try:
            engine.evicted()  # the master's HTTP service answers: it is up
        except EngineUnavailable as error:
            raise EngineUnavailable(f"cannot reach the Mooncake master {MASTER_VARIABLE}={master!r}: {error}") from None
        client = _client_class()()
        code = client.setup("127.0.0.1", metadata, 0, 1 << 20, "tcp", "", master)
        if code != 0:
            raise EngineUnavailable(f"cannot join the Mooncake master {master!r} via {metadata!r}: setup gave {code}")
        engine.client = client
        return engine

    def _get(self, path: str) -> str:
        try:
            with urllib.request.urlopen(self.http + path, timeout=HTTP_SECONDS) as answer:
                text: str = answer.read().decode("utf-8", "replace")
                return text
        except (OSError, ValueError) as error:
            raise EngineUnavailable(f"the master's HTTP service {self.http}{path} ({HTTP_VARIABLE}): {error}") from None

    def evicted(self) -> int:
        found = re.search(r"^master_evicted_key_count (\d+)", self._get("/metrics"), re.MULTILINE)
        if found is None:
            raise EngineUnavailable(f"{self.http}/metrics has no master_evicted_key_count: is it a Mooncake master?")
        return int(found.group(1))

    def names(self) -> set[str]:
        """Every name the master holds now."""
        return {line for line in self._get("/get_all_keys").splitlines() if line}

    def evictor(self, rate: float | None = None) -> MooncakeEvictor:
        return MooncakeEvictor(self, RATE if rate is None else rate)

    def close(self) -> None:
        if self.client is not None:
            self.client.close()


@dataclass
class MooncakeEvictor:
    """Removes objects of the running trace's store before its calls, as the master may evict them."""

    engine: MooncakeEngine
    rate: float = RATE
    deleted: int = 0  # objects removed between calls, over the run
    refused: int = 0  # removals the master refused for a read's lease (-706): the object stayed
    _random: random.Random = field(default_factory=random.Random)
    _before: set[str] = field(default_factory=set)

    def start(self, seed: int) -> None:
        """A trace begins: what the master holds now is not its store's."""
        self._random = random.Random(seed)
        self._before = self.engine.names()

    def strike(self) -> None:
        """Before a call: remove each object the trace's store wrote with probability ``rate``."""
        mine = sorted(self.engine.names() - self._before)  # sorted: the same names draw the same removals
        for name in mine:
            if self._random.random() >= self.rate:
                continue
            code = self.engine.client.remove(name)
            if code == 0:
                self.deleted += 1
            elif code == OBJECT_HAS_LEASE:
                self.refused += 1  # M3: a leased object is neither evicted nor removed; it stays readable
            elif code != OBJECT_NOT_FOUND:
                raise EngineUnavailable(f"the Mooncake master answered remove({name!r}) with {code}")

    def finish(self) -> None:
        """The trace ended: the objects its store wrote go, past their leases."""
        mine = sorted(self.engine.names() - self._before)
        if mine:
            self.engine.client.batch_remove(mine, True)

    def refusals(self) -> str:
        if not self.refused:
            return ""
        return f"the master refused {self.refused} of verify's removals for a read's lease (-706: kept, rule M3)"
