"""MooncakeBlockObjectStore against the raw Mooncake client on the same bytes,
with the in-process store beside both, and the Redis store's table after it
when ``redis-server`` is installed (docs/performance.md, "Remote store: Mooncake").

    python benchmarks/bench_mooncake.py [--objects 64] [--object-nbytes 4096] [--quick]

It starts its own ``mooncake_master`` on free loopback ports (the
``mooncake`` extra) and one client lending a 16 MiB segment; nothing is
evicted while it measures (the batch is far smaller than the pool). Each
scenario times a batched call through the store and the same work done with
the client directly (``upsert_batch`` of the same payloads under names as
long; ``batch_get_buffer`` with each buffer copied out, joined or into the
buffer), in alternating rounds; the figure is the median round. Ratio = raw
time / store time (1.0: no cost; 0.9: the store is 10% slower).
"""

from __future__ import annotations

import argparse
import shutil
import sys
from collections.abc import Callable

from bench_remote import median_seconds, own_server, paired
from bench_remote import run as run_redis

from auxstore import BlockObject, BlockObjectStore
from auxstore.remote import MooncakeBlockObjectStore
from auxstore.remote._local_master import local_master
from auxstore.remote._mooncake import connect


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--objects", type=int, default=64, help="objects per batch (default 64)")
    parser.add_argument("--object-nbytes", type=int, default=4096, help="bytes per object (default 4096)")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--repeat", type=int, default=50, help="calls per round")
    parser.add_argument("--quick", action="store_true", help="3 rounds of 10 calls")
    args = parser.parse_args(argv)
    rounds, repeat = (3, 10) if args.quick else (args.rounds, args.repeat)
    with local_master() as master:
        client = connect(master.master, master.metadata)
        try:
            run(client, args.objects, args.object_nbytes, rounds, repeat)
        finally:
            client.close()
    if shutil.which("redis-server") is None:
        print("\nno redis-server: the Redis store's table is left out (apt-get install -y redis-server)")
        return 0
    print("\nThe Redis store in the same run (benchmarks/bench_remote.py):")
    with own_server() as url:
        return run_redis(url, args.objects, args.object_nbytes, rounds, repeat)


def run(client: object, count: int, nbytes: int, rounds: int, repeat: int) -> None:
    engine: object = client
    store = MooncakeBlockObjectStore(count * nbytes, nbytes, client=client, namespace="bench")
    local = BlockObjectStore(max_bytes=count * nbytes, object_nbytes=nbytes)
    keys = [f"block-{index:05d}" for index in range(count)]
    batch = [BlockObject(key, bytes([index % 251]) * nbytes) for index, key in enumerate(keys)]
    # Names as long as the store's ("auxstore:5:bench:<nbytes>:<key>"), in another namespace.
    names = [f"auxstore:5:rawmc:{nbytes}:{key}" for key in keys]
    payloads = [obj.payload for obj in batch]
    buffer = bytearray(count * nbytes)
    view = memoryview(buffer)
    upsert: Callable[[list[str], list[bytes]], int] = getattr(engine, "upsert_batch")  # noqa: B009
    get: Callable[[list[str]], list[object]] = getattr(engine, "batch_get_buffer")  # noqa: B009

    def raw_put() -> None:
        if upsert(names, payloads) != 0:
            raise RuntimeError("raw upsert_batch failed")

    def raw_get() -> bytes:
        return b"".join(bytes(memoryview(handle)) for handle in get(names))  # type: ignore[arg-type]

    def raw_read_into() -> None:
        start = 0
        for handle in get(names):
            with memoryview(handle) as payload, payload.cast("B") as octets:  # type: ignore[arg-type]
                view[start : start + nbytes] = octets
            start += nbytes

    store.put(batch)
    raw_put()
    local.put(batch)
    assert store.get_concatenated(keys) == raw_get() == local.get_concatenated(keys)
    scenarios: list[tuple[str, Callable[[], object], Callable[[], object], Callable[[], object]]] = [
        ("put (upsert_batch)", lambda: store.put(batch), raw_put, lambda: local.put(batch)),
        (
            "get_concatenated (batch_get_buffer)",
            lambda: store.get_concatenated(keys),
            raw_get,
            lambda: local.get_concatenated(keys),
        ),
        (
            "read_into (batch_get_buffer)",
            lambda: store.read_into(keys, buffer),
            raw_read_into,
            lambda: local.read_into(keys, buffer),
        ),
    ]
    print(
        f"{count} objects of {nbytes} bytes per call; Mooncake over TCP on loopback; "
        f"median of {rounds} rounds of {repeat} calls"
    )
    print(f"{'scenario':<37} {'store µs':>10} {'raw µs':>10} {'ratio':>7} {'in-process µs':>14}")
    for name, mine, theirs, inprocess in scenarios:
        store_s, raw_s = paired(mine, theirs, rounds, repeat)
        local_s = median_seconds(inprocess, repeat * rounds)
        print(f"{name:<37} {store_s * 1e6:>10.1f} {raw_s * 1e6:>10.1f} {raw_s / store_s:>7.2f} {local_s * 1e6:>14.1f}")
    store.close()
    local.close()


if __name__ == "__main__":
    sys.exit(main())
