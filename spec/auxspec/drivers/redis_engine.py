"""The Redis server a ``remote`` verify runs against, and the evictions verify adds
(a ``remote_engines.Engine``).

``auxspec verify --profile remote`` judges a store whose objects live in a
Redis server named by ``AUXSTORE_REDIS_URL`` (the store reads the same
variable; a port process inherits it). A server under ``maxmemory`` evicts
when it likes, which a run cannot steer or repeat; so, as the profile allows
an engine to drop any object between two calls, verify also deletes keys
itself before each call, seeded: each key the running trace's store has
written (a key that was not in the database when the trace began) with
probability ``RATE``. A trace's deletions depend only on its seed and on the
keys the store writes, so a counterexample replays with them. At the end of
each trace the keys its store wrote are deleted: the database is verify's
scratch space (docs/remote.md says so).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from auxspec.drivers.remote_engines import EngineUnavailable

URL_VARIABLE = "AUXSTORE_REDIS_URL"  # the name auxstore.remote reads too
RATE = 0.2  # the chance that verify deletes each of the trace's keys before a call
CONNECT_SECONDS = 5.0  # how long verify waits for the server before it says it cannot be reached


def server_url(environ: dict[str, str] | Any) -> str:
    url = environ.get(URL_VARIABLE, "")
    if not url:
        raise EngineUnavailable(
            f"--profile remote needs a Redis server: set {URL_VARIABLE} (e.g. redis://127.0.0.1:6379/0; "
            "its database is verify's scratch space, see docs/remote.md)"
        )
    return str(url)


def connect(url: str) -> Any:
    """A client of the server at ``url`` that has answered a PING."""
    try:
        import redis
    except ImportError:
        raise EngineUnavailable("--profile remote needs the redis client: pip install 'auxstore[redis]'") from None
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=CONNECT_SECONDS, socket_timeout=60)
        client.ping()
    except ValueError as error:
        raise EngineUnavailable(f"{URL_VARIABLE}={url!r} is not a Redis URL: {error}") from None
    except redis.RedisError as error:
        message = str(error).replace("\n", " ")
        raise EngineUnavailable(f"cannot reach the Redis server {URL_VARIABLE}={url!r}: {message}") from None
    return client


def evicted_keys(client: Any) -> int:
    """The server's count of keys it evicted for memory since it started (INFO stats)."""
    return int(client.info("stats")["evicted_keys"])


@dataclass
class Evictor:
    """Deletes keys of the running trace's store before its calls, as an engine may."""

    client: Any
    rate: float = RATE
    deleted: int = 0  # keys deleted between calls, over the run
    refused: int = 0  # Redis deletes whatever it is asked to
    _random: random.Random = field(default_factory=random.Random)
    _before: set[bytes] = field(default_factory=set)

    def _keys(self) -> set[bytes]:
        return set(self.client.scan_iter(count=1000))

    def start(self, seed: int) -> None:
        """A trace begins: what the database holds now is not its store's."""
        self._random = random.Random(seed)
        self._before = self._keys()

    def strike(self) -> None:
        """Before a call: delete each key the trace's store wrote with probability ``rate``."""
        mine = sorted(self._keys() - self._before)  # sorted: the same keys draw the same deletions
        doomed = [name for name in mine if self._random.random() < self.rate]
        if doomed:
            self.deleted += int(self.client.delete(*doomed))

    def finish(self) -> None:
        """The trace ended: the keys its store wrote go (its store is closed)."""
        mine = list(self._keys() - self._before)
        for start in range(0, len(mine), 1000):
            self.client.delete(*mine[start : start + 1000])

    def refusals(self) -> str:
        return ""  # Redis deletes whatever it is asked to


@dataclass
class RedisEngine:
    """The Redis server of ``AUXSTORE_REDIS_URL`` (remote_engines.Engine)."""

    client: Any
    address: str
    name: str = "redis"
    options: tuple[str, ...] = ()  # MSET runs a batch whole, and a key MGET misses is gone
    counter: str = "keys for memory (INFO evicted_keys)"

    @classmethod
    def connect(cls, environ: Any) -> RedisEngine:
        url = server_url(environ)
        return cls(connect(url), url)

    def evicted(self) -> int:
        return evicted_keys(self.client)

    def evictor(self, rate: float | None = None) -> Evictor:
        return Evictor(self.client, RATE if rate is None else rate)

    def close(self) -> None:
        self.client.close()
