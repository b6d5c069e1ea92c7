"""RedisBlockObjectStore against the raw redis client on the same bytes, and
the in-process store beside both (docs/performance.md, "Remote store").

    python benchmarks/bench_remote.py [--url redis://...] [--objects 64] [--object-nbytes 4096]

Without ``--url`` it starts its own ``redis-server`` on a free loopback port
(no persistence, no maxmemory, so nothing is evicted while it measures) and
stops it at the end. Each scenario times a batched call through the store
and the same work done with the client directly (one ``MSET`` of the same
names and bytes; one ``MGET`` joined, or copied into the buffer), in
alternating rounds so both see the same machine; the figure is the median
round. Ratio = raw time / store time (1.0: no cost; 0.9: the store is 10%
slower).
"""

from __future__ import annotations

import argparse
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from auxstore import BlockObject, BlockObjectStore
from auxstore.remote import RedisBlockObjectStore


@contextmanager
def own_server() -> Iterator[str]:
    binary = shutil.which("redis-server")
    if binary is None:
        sys.exit("bench_remote: no redis-server (apt-get install -y redis-server), and no --url given")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with tempfile.TemporaryDirectory() as folder:
        command = [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", folder, "--save", ""]
        process = subprocess.Popen([*command, "--appendonly", "no"], stdout=subprocess.DEVNULL)
        try:
            import redis

            client = redis.Redis(port=port)
            for _ in range(300):
                try:
                    client.ping()
                    break
                except redis.ConnectionError:
                    time.sleep(0.02)
            client.close()
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            process.terminate()
            process.wait(timeout=20)


def median_seconds(call: Callable[[], object], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


Call = Callable[[], object]


def paired(store_call: Call, raw_call: Call, rounds: int, repeat: int) -> tuple[float, float]:
    """Median over ``rounds`` alternating rounds of each call's median time."""
    mine, theirs = [], []
    for _ in range(rounds):
        mine.append(median_seconds(store_call, repeat))
        theirs.append(median_seconds(raw_call, repeat))
    return statistics.median(mine), statistics.median(theirs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="an existing server (default: start one)")
    parser.add_argument("--objects", type=int, default=64, help="objects per batch (default 64)")
    parser.add_argument("--object-nbytes", type=int, default=4096, help="bytes per object (default 4096)")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--repeat", type=int, default=50, help="calls per round")
    parser.add_argument("--quick", action="store_true", help="3 rounds of 10 calls")
    args = parser.parse_args(argv)
    rounds, repeat = (3, 10) if args.quick else (args.rounds, args.repeat)
    with own_server() if args.url is None else _given(args.url) as url:
        return run(url, args.objects, args.object_nbytes, rounds, repeat)


@contextmanager
def _given(url: str) -> Iterator[str]:
    yield url


def run(url: str, count: int, nbytes: int, rounds: int, repeat: int) -> int:
    import redis

    client = redis.Redis.from_url(url)
    store = RedisBlockObjectStore(count * nbytes, nbytes, url=url, namespace="bench")
    local = BlockObjectStore(max_bytes=count * nbytes, object_nbytes=nbytes)
    keys = [f"block-{index:05d}" for index in range(count)]
    batch = [BlockObject(key, bytes([index % 251]) * nbytes) for index, key in enumerate(keys)]
    names = [f"auxstore:raw:{nbytes}:{key}".encode() for key in keys]
    named = dict(zip(names, (obj.payload for obj in batch), strict=True))
    buffer = bytearray(count * nbytes)
    view = memoryview(buffer)

    def raw_read_into() -> None:
        start = 0
        for value in client.mget(names):
            view[start : start + nbytes] = value
            start += nbytes

    store.put(batch)
    client.mset(named)
    local.put(batch)
    scenarios: list[tuple[str, Callable[[], object], Callable[[], object], Callable[[], object]]] = [
        ("put (MSET)", lambda: store.put(batch), lambda: client.mset(named), lambda: local.put(batch)),
        (
            "get_concatenated (MGET)",
            lambda: store.get_concatenated(keys),
            lambda: b"".join(client.mget(names)),
            lambda: local.get_concatenated(keys),
        ),
        (
            "read_into (MGET)",
            lambda: store.read_into(keys, buffer),
            raw_read_into,
            lambda: local.read_into(keys, buffer),
        ),
    ]
    print(f"{count} objects of {nbytes} bytes per call; {url}; median of {rounds} rounds of {repeat} calls")
    print(f"{'scenario':<26} {'store µs':>10} {'raw µs':>10} {'ratio':>7} {'in-process µs':>14}")
    for name, mine, theirs, inprocess in scenarios:
        store_s, raw_s = paired(mine, theirs, rounds, repeat)
        local_s = median_seconds(inprocess, repeat * rounds)
        print(f"{name:<26} {store_s * 1e6:>10.1f} {raw_s * 1e6:>10.1f} {raw_s / store_s:>7.2f} {local_s * 1e6:>14.1f}")
    store.close()
    local.close()
    client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
