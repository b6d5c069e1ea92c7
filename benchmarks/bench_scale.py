"""Scale curves: put, read and memory of auxstore's store and vLLM's from 10^3 to 10^6 slots.

    .venv/bin/python benchmarks/bench_scale.py [--sizes 1000,10000,...] [--repeat N]
        [--quick] [--json OUT] [--plot OUT.png] [--baseline PATH] [--clock wall|cpu]

For each number of slots, both stores are filled (under ``tracemalloc``, to
measure their bookkeeping), then timed side by side in one process:

- put: one ``put`` of 16 new objects into the full store (each evicts 16);
- read: ``get_concatenated`` of a fixed random sample of stored keys
  (scattered slots), per key read;
- memory: traced bytes per stored object (the full store minus the same store
  empty; keys are made under tracing, since the store keeps them; payloads
  come from a shared pool; the mmap arena is not traced).

The object size is vLLM's 6,144 bytes while the arena stays within
``ARENA_BUDGET`` bytes, and shrinks with more slots (to 256 bytes at 10^6),
so both arenas fit a small machine. Ratios are vLLM / auxstore (above 1:
auxstore better), measured in the same run; each cell is a median over
``--repeat`` alternating samples. ``--plot`` draws the three curves with
matplotlib (the ``dev`` extra; the store itself never needs it).
"""

from __future__ import annotations

import argparse
import datetime
import functools
import gc
import json
import os
import platform
import random
import statistics
import sys
import time
import tracemalloc
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_store import (  # the sibling script, found through the line above
    CLOCKS,
    Impl,
    Store,
    _consume,
    alternating,
    get_into,
    key,
    load_module,
    run_puts,
    sized_impls,
    timed,
    upstream_location,
    use_clock,
)

BATCH = 16
READ_KEYS = 1_000  # keys per timed read (fewer in a store with fewer slots)
ARENA_BUDGET = 256 << 20  # bytes per store's arena
MAX_OBJECT = 16 * 48 * 8  # vLLM's routed-expert block, as in bench_store.py
SIZES = (1_000, 3_000, 10_000, 30_000, 100_000, 300_000, 1_000_000)
QUICK_SIZES = (200, 1_000)
SEED = 20_241_203


def object_nbytes(slots: int) -> int:
    """vLLM's object size while the arena fits ARENA_BUDGET, else the largest multiple of 64 that does."""
    return min(MAX_OBJECT, max(64, ARENA_BUDGET // slots // 64 * 64))


@dataclass(frozen=True)
class Point:
    """One size's medians, for both stores."""

    slots: int
    object_nbytes: int
    aux_put_us: float
    vllm_put_us: float
    aux_read_us: float  # per key read
    vllm_read_us: float
    aux_bytes: float  # traced bytes per stored object
    vllm_bytes: float
    read_keys: int
    fill_s: float  # wall time of both fills (under tracemalloc)


def fill_traced(impl: Impl, slots: int, payloads: list[bytes]) -> tuple[Store, float]:
    """A full store of keys 0..slots-1, and its traced bytes per object."""
    make = impl.make_object
    gc.collect()
    tracemalloc.start()
    try:
        store = impl.make_store()
        empty = tracemalloc.get_traced_memory()[0]
        put = store.put
        for b in range(0, slots, BATCH):
            put([make(key(i), payloads[i % len(payloads)]) for i in range(b, min(b + BATCH, slots))])
        gc.collect()
        full = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    return store, (full - empty) / slots


def measure(module: Any, slots: int, repeat: int, puts_per_sample: int) -> Point:
    nbytes = object_nbytes(slots)
    payloads = [bytes([i]) * nbytes for i in range(251)]
    sides = sized_impls(module, slots, nbytes)
    started = time.perf_counter()
    stores: dict[str, Store] = {}
    per_object: dict[str, float] = {}
    try:
        for impl in sides:
            stores[impl.name], per_object[impl.name] = fill_traced(impl, slots, payloads)
        fill_s = time.perf_counter() - started
        read_count = min(READ_KEYS, slots // 2)
        put_us: dict[str, list[float]] = {impl.name: [] for impl in sides}
        read_us: dict[str, list[float]] = {impl.name: [] for impl in sides}
        next_key = slots
        rng = random.Random(SEED + slots)
        # What both stores hold, in recency order (nothing is pinned: plain LRU),
        # so the read sample is always of stored keys.
        model: OrderedDict[int, None] = OrderedDict.fromkeys(range(slots))
        evicted = -1
        for r in range(-1, repeat):  # r == -1: warm-up, not recorded
            # Each side puts the same new keys, then reads a sample of what it then holds.
            for i in range(next_key, next_key + puts_per_sample * BATCH):
                model[i] = None
                evicted = model.popitem(last=False)[0]
            indices = rng.sample(list(model), read_count)
            keys = [key(i) for i in indices]
            expected = b"".join(payloads[i % len(payloads)] for i in indices)
            _consume(map(model.move_to_end, indices))
            for impl in alternating(sides, max(r, 0)):
                store = stores[impl.name]
                make = impl.make_object
                work = [
                    [make(key(i), payloads[i % len(payloads)]) for i in range(b, b + BATCH)]
                    for b in range(next_key, next_key + puts_per_sample * BATCH, BATCH)
                ]
                put_ns = timed(functools.partial(run_puts, store, work))
                got: list[bytes] = []
                read_ns = timed(functools.partial(get_into, store, keys, got))
                if got[0] != expected:
                    raise SystemExit(f"{impl.name}: get_concatenated returned the wrong bytes at {slots} slots")
                if r >= 0:
                    put_us[impl.name].append(put_ns / puts_per_sample / 1000)
                    read_us[impl.name].append(read_ns / read_count / 1000)
            next_key += puts_per_sample * BATCH
        for impl in sides:  # the pins-free LRU the model follows: its oldest key is stored, its last victim not
            store = stores[impl.name]
            store.get_concatenated([key(next(iter(model))), key(next(reversed(model)))])
            try:
                store.get_concatenated([key(evicted)])
            except RuntimeError:
                pass
            else:
                raise SystemExit(f"{impl.name}: key {evicted} should have been evicted at {slots} slots")
    finally:
        for store in stores.values():
            store.close()
    aux, vllm = (impl.name for impl in sides)
    return Point(
        slots,
        nbytes,
        statistics.median(put_us[aux]),
        statistics.median(put_us[vllm]),
        statistics.median(read_us[aux]),
        statistics.median(read_us[vllm]),
        per_object[aux],
        per_object[vllm],
        read_count,
        fill_s,
    )


def table(points: Sequence[Point]) -> list[str]:
    head = (
        "| slots | object | put auxstore | put vLLM | ratio | read auxstore | read vLLM | ratio "
        "| memory auxstore | memory vLLM | ratio |"
    )
    lines = [head, "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for p in points:
        lines.append(
            f"| {p.slots:,} | {p.object_nbytes:,} B | {p.aux_put_us:.1f} µs | {p.vllm_put_us:.1f} µs "
            f"| {p.vllm_put_us / p.aux_put_us:.2f}x | {p.aux_read_us:.2f} µs | {p.vllm_read_us:.2f} µs "
            f"| {p.vllm_read_us / p.aux_read_us:.2f}x | {p.aux_bytes:.0f} B | {p.vllm_bytes:.0f} B "
            f"| {p.vllm_bytes / p.aux_bytes:.2f}x |"
        )
    return lines


def plot(points: Sequence[Point], out: Path, title: str) -> None:
    """Three panels against the number of slots (log scale), both stores in each."""
    try:
        import matplotlib
    except ImportError:
        raise SystemExit("--plot needs matplotlib (pip install -e '.[dev]')") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    slots = [p.slots for p in points]
    panels: list[tuple[str, Callable[[Point], float], Callable[[Point], float]]] = [
        ("put of 16 new objects (µs)", lambda p: p.aux_put_us, lambda p: p.vllm_put_us),
        ("get_concatenated, per key read (µs)", lambda p: p.aux_read_us, lambda p: p.vllm_read_us),
        ("bookkeeping per stored object (bytes)", lambda p: p.aux_bytes, lambda p: p.vllm_bytes),
    ]
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2), constrained_layout=True)
    for ax, (label, aux, vllm) in zip(axes, panels, strict=True):
        ax.plot(slots, [aux(p) for p in points], "o-", label="auxstore")
        ax.plot(slots, [vllm(p) for p in points], "s--", label="vLLM")
        ax.set_xscale("log")
        ax.set_xlabel("slots")
        ax.set_title(label)
        ax.set_ylim(bottom=0)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.suptitle(title)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=90)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--baseline", metavar="PATH", help="vLLM's store module (default: ../shared/upstream)")
    parser.add_argument("--sizes", help="comma-separated slot counts (default: 10^3 to 10^6)")
    parser.add_argument("--repeat", type=int, default=15, metavar="N", help="timed samples per size and side")
    parser.add_argument("--puts", type=int, default=16, metavar="N", help="puts per timed sample")
    parser.add_argument("--quick", action="store_true", help="smoke run: two tiny sizes, three samples")
    parser.add_argument("--json", metavar="OUT", help="also write the points and the machine's details here")
    parser.add_argument("--plot", metavar="OUT.png", help="draw the curves into this PNG (needs matplotlib)")
    parser.add_argument(
        "--clock", choices=sorted(CLOCKS), default="wall", help="wall time, or this thread's CPU time (shared machines)"
    )
    args = parser.parse_args(argv)
    use_clock(args.clock)

    sizes: tuple[int, ...] = QUICK_SIZES if args.quick else SIZES
    if args.sizes:
        sizes = tuple(int(s.replace("_", "")) for s in args.sizes.split(","))
    if any(s < 2 for s in sizes):
        parser.error("every size must be at least 2 slots")
    repeat = 3 if args.quick and args.repeat == 15 else args.repeat
    if repeat < 1 or args.puts < 1:
        parser.error("--repeat and --puts must be at least 1")
    path = upstream_location(args.baseline)
    if not path.is_file():
        parser.error(f"vLLM's store module not found at {path} (use --baseline PATH or AUXSTORE_UPSTREAM)")
    module = load_module(path)

    started = time.perf_counter()
    print(f"batches of {BATCH}, {repeat} repeats of {args.puts} puts, {args.clock} clock; baseline {path}")
    points: list[Point] = []
    for slots in sizes:
        point = measure(module, slots, repeat, args.puts)
        points.append(point)
        print(
            f"{slots:>9,} slots x {point.object_nbytes:>5,} B: put {point.aux_put_us:6.1f} / {point.vllm_put_us:6.1f} "
            f"µs, read {point.aux_read_us:5.2f} / {point.vllm_read_us:5.2f} µs/key, "
            f"memory {point.aux_bytes:4.0f} / {point.vllm_bytes:4.0f} B/object (auxstore / vLLM; "
            f"fills {point.fill_s:.1f} s)",
            flush=True,
        )
    elapsed = time.perf_counter() - started
    print()
    print("\n".join(table(points)))
    print("ratio = vLLM / auxstore: above 1 means auxstore is better.")
    print(f"total {elapsed:.1f} s")
    date = datetime.datetime.now(datetime.UTC)
    if args.plot:
        title = f"auxstore vs vLLM by store size ({date:%Y-%m-%d}, medians of {repeat}, {args.clock} time)"
        plot(points, Path(args.plot), title)
        print(f"plot written to {args.plot}")
    if args.json:
        report = {
            "date": date.isoformat(timespec="seconds"),
            "command": [Path(sys.executable).name, *sys.argv],
            "python": sys.version,
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "load_average": os.getloadavg(),
            "baseline": str(path),
            "batch": BATCH,
            "repeat": repeat,
            "puts_per_sample": args.puts,
            "clock": args.clock,
            "elapsed_s": elapsed,
            "points": [asdict(p) for p in points],
        }
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)  # --json /tmp/speed/run.json as the docs show it
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
