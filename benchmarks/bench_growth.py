"""Growth curves: put, get_concatenated and read_into per object against capacity and pinned fraction.

    .venv/bin/python benchmarks/bench_growth.py [--sizes 1000,10000,...] [--pinned 0,0.5,...]
        [--repeat N] [--quick] [--object-nbytes B] [--json OUT] [--plot OUT.png|OUT.svg] [--baseline PATH]
        [--clock wall|cpu]
    .venv/bin/python benchmarks/bench_growth.py --from-json OUT --plot OUT.png   # redraw, measuring nothing

For each capacity (10^3 to 10^6 slots by default), both stores are filled
once; then, for each pinned fraction in increasing order (0 to 99% by
default), the oldest unpinned keys are retained until that fraction of the
store is pinned, and both are timed side by side in one process:

A put of 16 new keys needs 16 unpinned keys to evict, so at most all but
32 keys are pinned (at 10^3 slots, "99%" pins 968 keys; the JSON and the
progress lines give the count).

- put: ``put`` of 16 new objects into the full store (each evicts the 16
  oldest unpinned keys), per object;
- get: ``get_concatenated`` of READ_KEYS stored keys drawn at random (pinned
  or not: scattered slots), per key;
- read_into: the same keys into a reused buffer, per key. vLLM's module has
  no ``read_into``; its column is what a caller of it does instead,
  ``get_concatenated`` and one copy of the result into the buffer. auxstore
  uses its one-call gather when numpy is installed (the first line printed
  says which).

The object size is the same at every capacity (64 bytes by default, so 10^6
objects fit a small machine), so the curves compare across capacities: flat
where the cost per object is O(1). Ratios are vLLM / auxstore (above 1:
auxstore faster); each cell is the median of ``--repeat`` alternating
samples. ``--plot`` draws one panel per operation, cost per object against
capacity on log-log axes, a line per store and pinned fraction (matplotlib,
the dev extra; PNG or SVG by the file's suffix).
"""

from __future__ import annotations

import argparse
import datetime
import functools
import json
import os
import platform
import random
import statistics
import sys
import time
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
READ_KEYS = 256  # keys per timed read (half the store, if it holds fewer than twice that)
SIZES = (1_000, 10_000, 100_000, 1_000_000)
PINNED = (0.0, 0.5, 0.9, 0.99)
QUICK_SIZES = (1_000, 4_000)
QUICK_PINNED = (0.0, 0.9)
OBJECT_NBYTES = 64
SEED = 20_261_207
RETAIN_CHUNK = 4_096  # keys retained per put when pinning more


@dataclass(frozen=True)
class Cell:
    """One (capacity, pinned fraction): medians per object, in µs, for both stores."""

    slots: int
    pinned: float  # the fraction of the store pinned
    pinned_keys: int
    aux_put_us: float
    vllm_put_us: float
    aux_get_us: float
    vllm_get_us: float
    aux_read_into_us: float
    vllm_read_into_us: float
    read_keys: int


def payload_of(i: int, nbytes: int) -> bytes:
    return (i % 251).to_bytes(1, "little") * nbytes


class Model:
    """What both stores hold: the unpinned keys least recent first, and the pinned ones.

    The benchmark only puts new keys, retains unpinned ones and reads stored
    ones, so this is all of the semantics it needs (no releases)."""

    def __init__(self, slots: int) -> None:
        self.unpinned: OrderedDict[int, None] = OrderedDict.fromkeys(range(slots))
        self.pinned: list[int] = []
        self.evicted = -1

    def put(self, new: range) -> None:
        for i in new:
            self.unpinned[i] = None
        for _ in new:
            self.evicted = self.unpinned.popitem(last=False)[0]

    def pin_oldest(self, count: int) -> list[int]:
        keys = [self.unpinned.popitem(last=False)[0] for _ in range(count)]
        self.pinned.extend(keys)
        return keys

    def read(self, rng: random.Random, count: int) -> list[int]:
        stored = len(self.pinned) + len(self.unpinned)
        picks = rng.sample(range(stored), count)
        unpinned = list(self.unpinned) if any(p >= len(self.pinned) for p in picks) else []
        keys = [self.pinned[p] if p < len(self.pinned) else unpinned[p - len(self.pinned)] for p in picks]
        for i in keys:
            if i in self.unpinned:
                self.unpinned.move_to_end(i)
        return keys


def fill(impl: Impl, slots: int, nbytes: int) -> Store:
    store = impl.make_store()
    make, put = impl.make_object, store.put
    for b in range(0, slots, BATCH):
        put([make(key(i), payload_of(i, nbytes)) for i in range(b, min(b + BATCH, slots))])
    return store


def aux_read_into(store: Any, keys: list[str], buffer: bytearray) -> None:
    store.read_into(keys, buffer)


def vllm_read_into(store: Store, keys: list[str], buffer: bytearray) -> None:
    # What a caller of vLLM's module does for a read into its own buffer.
    data = store.get_concatenated(keys)
    buffer[: len(data)] = data


def measure_size(
    module: Any,
    slots: int,
    fractions: Sequence[float],
    repeat: int,
    puts: int,
    nbytes: int,
    report: Callable[[Cell], None],
) -> list[Cell]:
    sides = sized_impls(module, slots, nbytes)
    stores = {impl.name: fill(impl, slots, nbytes) for impl in sides}
    reads = {"auxstore": aux_read_into, "vLLM": vllm_read_into}
    model = Model(slots)
    rng = random.Random(SEED + slots)
    read_count = min(READ_KEYS, slots // 2)
    buffer = bytearray(read_count * nbytes)
    next_key = slots
    cells = []
    try:
        for fraction in fractions:
            # A put of 16 new keys needs 16 unpinned keys to evict: a small store keeps 32 unpinned
            # (99% of 10^3 pins 968 keys, 96.8%); pinned_keys says how many were.
            more = min(round(fraction * slots), slots - 2 * BATCH) - len(model.pinned)
            if more > 0:
                pins = model.pin_oldest(more)
                for store in stores.values():
                    for at in range(0, len(pins), RETAIN_CHUNK):
                        store.put([], retain_keys=[key(i) for i in pins[at : at + RETAIN_CHUNK]])
            samples: dict[str, dict[str, list[float]]] = {
                name: {impl.name: [] for impl in sides} for name in ("put", "get", "read_into")
            }
            for r in range(-1, repeat):  # r == -1: warm-up, not recorded
                new = range(next_key, next_key + puts * BATCH)
                next_key += puts * BATCH
                model.put(new)
                indices = model.read(rng, read_count)
                keys = [key(i) for i in indices]
                expected = b"".join(payload_of(i, nbytes) for i in indices)
                for impl in alternating(sides, max(r, 0)):
                    store, make = stores[impl.name], impl.make_object
                    work = [
                        [make(key(i), payload_of(i, nbytes)) for i in new[b : b + BATCH]]
                        for b in range(0, len(new), BATCH)
                    ]
                    put_ns = timed(functools.partial(run_puts, store, work))
                    got: list[bytes] = []
                    get_ns = timed(functools.partial(get_into, store, keys, got))
                    buffer[:] = bytes(len(buffer))
                    read_ns = timed(functools.partial(reads[impl.name], store, keys, buffer))
                    if got[0] != expected or buffer != expected:
                        raise SystemExit(f"{impl.name}: a read returned the wrong bytes at {slots} slots")
                    if r >= 0:
                        samples["put"][impl.name].append(put_ns / (puts * BATCH) / 1000)
                        samples["get"][impl.name].append(get_ns / read_count / 1000)
                        samples["read_into"][impl.name].append(read_ns / read_count / 1000)
            check_state(stores, model, slots)
            med = {op: {name: statistics.median(v) for name, v in by.items()} for op, by in samples.items()}
            cell = Cell(
                slots,
                fraction,
                len(model.pinned),
                med["put"]["auxstore"],
                med["put"]["vLLM"],
                med["get"]["auxstore"],
                med["get"]["vLLM"],
                med["read_into"]["auxstore"],
                med["read_into"]["vLLM"],
                read_count,
            )
            report(cell)
            cells.append(cell)
    finally:
        for store in stores.values():
            store.close()
    return cells


def check_state(stores: dict[str, Store], model: Model, slots: int) -> None:
    """Each store holds what the model says: its oldest unpinned and a pinned key, not its last victim."""
    oldest = next(iter(model.unpinned))
    present = [key(oldest)] + ([key(model.pinned[0])] if model.pinned else [])
    for name, store in stores.items():
        store.get_concatenated(present)  # raises if either was evicted
        try:
            store.get_concatenated([key(model.evicted)])
        except RuntimeError:  # both stores' missing-key errors are RuntimeErrors
            pass
        else:
            raise SystemExit(f"{name}: key {model.evicted} should have been evicted at {slots} slots")
    model.unpinned.move_to_end(oldest)  # the read above made it most recent in both


def table(cells: Sequence[Cell]) -> list[str]:
    lines = [
        "| slots | pinned | put auxstore | put vLLM | ratio | get auxstore | get vLLM | ratio "
        "| read_into auxstore | read_into vLLM | ratio |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for c in cells:
        lines.append(
            f"| {c.slots:,} | {c.pinned:.0%} | {c.aux_put_us:.2f} µs | {c.vllm_put_us:.2f} µs "
            f"| {c.vllm_put_us / c.aux_put_us:.2f}x | {c.aux_get_us:.2f} µs | {c.vllm_get_us:.2f} µs "
            f"| {c.vllm_get_us / c.aux_get_us:.2f}x | {c.aux_read_into_us:.2f} µs | {c.vllm_read_into_us:.2f} µs "
            f"| {c.vllm_read_into_us / c.aux_read_into_us:.2f}x |"
        )
    return lines


def plot(cells: Sequence[Cell], out: Path, title: str) -> None:
    """One panel per operation: µs per object against slots (log), a line per store and pinned fraction."""
    try:
        import matplotlib
    except ImportError:
        raise SystemExit("--plot needs matplotlib (pip install -e '.[dev]')") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fractions = sorted({c.pinned for c in cells})
    colours = plt.get_cmap("viridis")
    panels: list[tuple[str, str, str]] = [
        ("put, per object", "aux_put_us", "vllm_put_us"),
        ("get_concatenated, per key", "aux_get_us", "vllm_get_us"),
        ("read_into, per key", "aux_read_into_us", "vllm_read_into_us"),
    ]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.8), constrained_layout=True)
    for ax, (label, aux, vllm) in zip(axes, panels, strict=True):
        for n, fraction in enumerate(fractions):
            row = sorted((c for c in cells if c.pinned == fraction), key=lambda c: c.slots)
            colour = colours(n / max(1, len(fractions) - 1) * 0.9)
            slots = [c.slots for c in row]
            aux_label, vllm_label = f"auxstore, {fraction:.0%} pinned", f"vLLM, {fraction:.0%} pinned"
            ax.plot(slots, [getattr(c, aux) for c in row], "o-", color=colour, label=aux_label)
            ax.plot(slots, [getattr(c, vllm) for c in row], "s--", color=colour, label=vllm_label)
        ax.set_xscale("log")
        if aux == "aux_put_us":  # vLLM's put grows by four orders of magnitude: only a log axis shows both
            ax.set_yscale("log")
        else:
            ax.set_ylim(bottom=0)
        ax.set_xlabel("slots (capacity)")
        ax.set_ylabel("µs")
        ax.set_title(label)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize="small")
    fig.suptitle(title)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=80)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--baseline", metavar="PATH", help="vLLM's store module (default: ../shared/upstream)")
    parser.add_argument("--sizes", help="comma-separated capacities in slots (default: 10^3 to 10^6)")
    parser.add_argument("--pinned", help="comma-separated pinned fractions, 0 to below 1 (default: 0,0.5,0.9,0.99)")
    parser.add_argument("--repeat", type=int, default=7, metavar="N", help="timed samples per cell and side")
    parser.add_argument("--quick", action="store_true", help="smoke run: two small sizes, two fractions, 3 samples")
    parser.add_argument("--puts", type=int, default=4, metavar="N", help="puts of 16 objects per timed sample")
    parser.add_argument("--object-nbytes", type=int, default=OBJECT_NBYTES, metavar="B", help="object size")
    parser.add_argument("--json", metavar="OUT", help="also write the cells and the machine's details here")
    parser.add_argument("--plot", metavar="OUT", help="draw the curves into this PNG or SVG (needs matplotlib)")
    parser.add_argument(
        "--clock", choices=sorted(CLOCKS), default="wall", help="wall time, or this thread's CPU time (shared machines)"
    )
    parser.add_argument("--from-json", metavar="IN", help="draw --plot from an earlier --json file")
    args = parser.parse_args(argv)
    if args.from_json:
        if not args.plot:
            parser.error("--from-json draws a plot: give --plot OUT")
        saved = json.loads(Path(args.from_json).read_text())
        title = (
            f"auxstore vs vLLM: cost per object by capacity and pinned fraction ({saved['date'][:10]}, "
            f"{saved['object_nbytes']} B objects, medians of {saved['repeat']}, {saved['clock']} time)"
        )
        plot([Cell(**c) for c in saved["cells"]], Path(args.plot), title)
        print(f"plot written to {args.plot}")
        return 0
    use_clock(args.clock)
    sizes = tuple(int(s.replace("_", "")) for s in args.sizes.split(",")) if args.sizes else SIZES
    fractions = tuple(sorted(float(f) for f in args.pinned.split(","))) if args.pinned else PINNED
    if args.quick:
        sizes = sizes if args.sizes else QUICK_SIZES
        fractions = fractions if args.pinned else QUICK_PINNED
        args.repeat = 3 if args.repeat == 7 else args.repeat
    if any(s < 2 * BATCH for s in sizes):
        parser.error(f"every size must be at least {2 * BATCH} slots")
    if any(not 0 <= f < 1 for f in fractions):
        parser.error("pinned fractions must be from 0 to below 1")
    if args.repeat < 1 or args.puts < 1 or args.object_nbytes < 1:
        parser.error("--repeat, --puts and --object-nbytes must be at least 1")
    path = upstream_location(args.baseline)
    if not path.is_file():
        parser.error(f"vLLM's store module not found at {path} (use --baseline PATH or AUXSTORE_UPSTREAM)")
    module = load_module(path)
    from auxstore._gather import numpy_gather

    gather = "numpy's one-call gather" if numpy_gather() is not None else "the pure-Python copy (numpy not installed)"
    print(
        f"object {args.object_nbytes:,} B, batches of {BATCH}, reads of up to {READ_KEYS} keys, {args.repeat} repeats "
        f"of {args.puts} puts, {args.clock} clock; auxstore's read_into: {gather}; baseline {path}"
    )

    def report(c: Cell) -> None:
        print(
            f"{c.slots:>9,} slots, {c.pinned:>4.0%} pinned ({c.pinned_keys:,} keys): "
            f"put {c.aux_put_us:7.2f} / {c.vllm_put_us:9.2f}, "
            f"get {c.aux_get_us:5.2f} / {c.vllm_get_us:5.2f}, read_into {c.aux_read_into_us:5.2f} / "
            f"{c.vllm_read_into_us:5.2f} µs per object (auxstore / vLLM)",
            flush=True,
        )

    started = time.perf_counter()
    cells: list[Cell] = []
    for slots in sizes:
        cells.extend(measure_size(module, slots, fractions, args.repeat, args.puts, args.object_nbytes, report))
    elapsed = time.perf_counter() - started
    print()
    print("\n".join(table(cells)))
    print("ratio = vLLM / auxstore: above 1 means auxstore is faster.")
    print(f"total {elapsed:.1f} s, load average {os.getloadavg()[0]:.1f}")
    date = datetime.datetime.now(datetime.UTC)
    if args.plot:
        title = (
            f"auxstore vs vLLM: cost per object by capacity and pinned fraction ({date:%Y-%m-%d}, "
            f"{args.object_nbytes} B objects, medians of {args.repeat}, {args.clock} time)"
        )
        plot(cells, Path(args.plot), title)
        print(f"plot written to {args.plot}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(
            json.dumps(
                {
                    "date": date.isoformat(timespec="seconds"),
                    "command": [Path(sys.executable).name, *sys.argv],
                    "python": sys.version,
                    "platform": platform.platform(),
                    "cpus": os.cpu_count(),
                    "load_average": os.getloadavg(),
                    "baseline": str(path),
                    "read_into": gather,
                    "repeat": args.repeat,
                    "puts_per_sample": args.puts,
                    "object_nbytes": args.object_nbytes,
                    "clock": args.clock,
                    "elapsed_s": elapsed,
                    "cells": [asdict(c) for c in cells],
                },
                indent=2,
            )
            + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
