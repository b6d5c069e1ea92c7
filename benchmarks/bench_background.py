"""Background store: owner-thread put latency and end-to-end write throughput,
auxstore against vLLM's module, measured in the same run.

    .venv/bin/python benchmarks/bench_background.py [--quick]

Latency: bursts of puts of 16 new 6,144-byte objects each, back to back, into
a queue deep enough never to block, so from the second put of a burst on the
writer is busy applying earlier batches while the owner puts. Each put is
timed on the owner thread. "idle" rows time the same put with the writer
idle (drained before each put), which shows what the busy writer adds.
"parked" rows time puts while the writer waits inside an inner store that
blocks (it holds no GIL), so they show the owner's own work alone; the last
line times the batch validator (``auxstore._batch.check_batch``) alone.

Throughput: batches put back to back (max_pending_batches=8, so the owner
waits when it gets ahead) and drained; objects and bytes per second.

Stacks: each background store over its own store, and auxstore's background
store over vLLM's store (the same inner work as vLLM's stack, so the
difference is the background layer alone).
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parents[1] / p) for p in ("impl", "spec")]

from auxspec.engine import target as targets  # noqa: E402
from auxstore import BackgroundBlockObjectStore, BlockObject, BlockObjectStore  # noqa: E402
from auxstore._batch import check_batch  # noqa: E402

OBJECTS, NBYTES = 16, 6144
CAPACITY = 4096  # objects: 24 MiB arena


def _batches(count: int, vllm_object: Any) -> list[list[Any]]:
    payloads = [bytes([i % 251]) * NBYTES for i in range(64)]
    cls = vllm_object or BlockObject
    return [[cls(f"b{b}-{i}", payloads[(b + i) % 64]) for i in range(OBJECTS)] for b in range(count)]


def _drain(store: Any) -> None:
    store.get_concatenated([])  # both wait for the queue before reading


def _percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def latency(make: Callable[[int], Any], vllm_object: Any, bursts: int, burst: int, busy: bool) -> list[float]:
    """Owner-side put latencies in microseconds."""
    store = make(burst + 2)
    batches = _batches(bursts * burst, vllm_object)
    samples: list[float] = []
    clock = time.perf_counter_ns
    gc.disable()  # a collection pause is not the store's latency
    try:
        for b in range(bursts):
            for i in range(burst):
                if not busy:
                    _drain(store)
                batch = batches[b * burst + i]
                start = clock()
                store.put(batch)
                samples.append((clock() - start) / 1000)
            _drain(store)
            if b % 8 == 7:
                gc.collect()
    finally:
        gc.enable()
        store.close()
    return samples[burst:] if busy else samples  # the first burst warms up


class _Parked:
    """An inner store whose put waits until released: the writer holds no GIL,
    so a put on the owner thread costs only its own work."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def put(self, objects: Any, **pins: Any) -> None:
        self.release.wait()

    def get_concatenated(self, keys: list[str]) -> bytes:
        return b""

    def close(self) -> None:
        self.release.set()


def parked(make_bg: Callable[[Any, int], Any], vllm_object: Any, count: int) -> list[float]:
    """Owner-side put latencies (us) with the writer parked inside the inner store."""
    inner = _Parked()
    store = make_bg(inner, count + 2)
    batches = _batches(count, vllm_object)
    samples: list[float] = []
    clock = time.perf_counter_ns
    gc.disable()
    try:
        for batch in batches:
            start = clock()
            store.put(batch)
            samples.append((clock() - start) / 1000)
    finally:
        gc.enable()
        inner.release.set()
        store.close()
    return samples[1:]


def validation(count: int) -> list[float]:
    """The batch validator alone (auxstore._batch.check_batch), per batch, in us."""
    batches = _batches(count, None)
    clock = time.perf_counter_ns
    samples: list[float] = []
    for batch in batches:
        start = clock()
        check_batch(batch, (), (), object_nbytes=NBYTES)
        samples.append((clock() - start) / 1000)
    return samples


def throughput(make: Callable[[int], Any], vllm_object: Any, count: int) -> float:
    """Objects written per second, end to end (put through drained)."""
    store = make(8)
    batches = _batches(count, vllm_object)
    _drain(store)
    start = time.perf_counter()
    for batch in batches:
        store.put(batch)
    _drain(store)
    elapsed = time.perf_counter() - start
    store.close()
    return count * OBJECTS / elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a short run (smoke test)")
    args = parser.parse_args()
    vllm = targets.load_upstream()
    if vllm is None:
        print("vLLM's module not found (../shared/upstream/vllm_store.py or $AUXSTORE_UPSTREAM): nothing to compare")
        return 1
    bursts, burst, count = (10, 32, 500) if args.quick else (200, 48, 5000)

    def auxstore_stack(bound: int) -> Any:
        inner = BlockObjectStore(max_bytes=CAPACITY * NBYTES, object_nbytes=NBYTES)
        return BackgroundBlockObjectStore(inner, max_pending_batches=bound)

    def vllm_stack(bound: int) -> Any:
        inner = vllm.BlockObjectStore(max_bytes=CAPACITY * NBYTES, object_nbytes=NBYTES)
        return vllm.BackgroundBlockObjectStore(inner, max_pending_batches=bound)

    def auxstore_over_vllm(bound: int) -> Any:
        inner = vllm.BlockObjectStore(max_bytes=CAPACITY * NBYTES, object_nbytes=NBYTES)
        return BackgroundBlockObjectStore(inner, max_pending_batches=bound)

    stacks: list[tuple[str, Callable[[int], Any], Any]] = [
        ("auxstore", auxstore_stack, None),
        ("vLLM", vllm_stack, vllm.BlockObject),
        ("auxstore bg / vLLM store", auxstore_over_vllm, vllm.BlockObject),
    ]
    backgrounds: dict[str, Callable[[Any, int], Any]] = {
        "auxstore": lambda inner, bound: BackgroundBlockObjectStore(inner, max_pending_batches=bound),
        "vLLM": lambda inner, bound: vllm.BackgroundBlockObjectStore(inner, max_pending_batches=bound),
        "auxstore bg / vLLM store": lambda inner, bound: BackgroundBlockObjectStore(inner, max_pending_batches=bound),
    }
    print(f"python {sys.version.split()[0]}, switch interval {sys.getswitchinterval() * 1e3:.1f} ms")
    print(f"put of {OBJECTS} objects x {NBYTES} B; {bursts} bursts of {burst} puts; throughput over {count} puts\n")
    rows: dict[str, dict[str, float]] = {}
    for name, make, vobj in stacks:
        busy = latency(make, vobj, bursts, burst, busy=True)
        idle = latency(make, vobj, max(2, bursts // 4), burst, busy=False)
        alone = parked(backgrounds[name], vobj, bursts * burst // 4)
        rows[name] = {
            "busy median": statistics.median(busy),
            "busy p99": _percentile(busy, 0.99),
            "busy p99.9": _percentile(busy, 0.999),
            "busy max": max(busy),
            "idle median": statistics.median(idle),
            "idle p99": _percentile(idle, 0.99),
            "parked median": statistics.median(alone),
            "parked p99": _percentile(alone, 0.99),
            "throughput": max(throughput(make, vobj, count) for _ in range(3)),  # best of 3: a shared machine
        }
    header = f"{'metric':<22}" + "".join(f"{name:>26}" for name in rows) + f"{'auxstore / vLLM':>18}"
    print(header)
    print("-" * len(header))
    for metric in rows["auxstore"]:
        unit = "objects/s" if metric == "throughput" else "us"
        cells = "".join(f"{rows[name][metric]:>22,.1f} {unit[:3]:<3}" for name in rows)
        ratio = rows["auxstore"][metric] / rows["vLLM"][metric]
        print(f"{metric:<22}{cells}{ratio:>17.2f}x")
    a, v = rows["auxstore"], rows["vLLM"]
    median_met = "met" if a["busy median"] <= 30 else "MISSED"
    print(
        f"\ntargets: median owner put {a['busy median']:.1f} us (<= 30: {median_met}); "
        f"p99 {a['busy p99']:.1f} us vs vLLM {v['busy p99']:.1f} us "
        f"({'met' if a['busy p99'] <= v['busy p99'] else 'MISSED'}: no worse than vLLM)"
    )
    print(f"throughput: auxstore {a['throughput'] / v['throughput']:.2f}x vLLM's")
    checks = validation(bursts * burst // 4)
    print(
        f"of the parked owner put ({a['parked median']:.1f} us median), the batch validator alone takes "
        f"{statistics.median(checks):.1f} us (p99 {_percentile(checks, 0.99):.1f} us); vLLM validates nothing"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
