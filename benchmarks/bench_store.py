"""Benchmark auxstore's BlockObjectStore against vLLM's, side by side in one process.

    .venv/bin/python benchmarks/bench_store.py [--baseline PATH] [--repeat N] [--quick] [--json OUT] [--clock wall|cpu]

Both stores hold vLLM's typical object (16 tokens x 48 MoE layers x top-8
routed-expert ids, one uint8 each: 6,144 bytes) in 20,000 slots. The two
implementations run interleaved, alternating which goes first, so a noisy
shared machine slows both alike; each row is the median over the repeats.
The ratio is always "vLLM / auxstore" (time, or bytes), so above 1 means
auxstore is better. This is a report, not a test: it exits 0 whether or not
the targets are met (a broken store, e.g. a wrong read, still exits non-zero).
"""

from __future__ import annotations

import argparse
import datetime
import functools
import gc
import importlib.util
import json
import mmap
import os
import platform
import random
import statistics
import sys
import time
import tracemalloc
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

OBJECT_NBYTES = 16 * 48 * 8  # tokens per block x MoE layers x top-k, uint8 expert ids
NUM_SLOTS = 20_000
MAX_BYTES = OBJECT_NBYTES * NUM_SLOTS
BATCH = 16
READ_KEYS = 5_000
PIN_FRACTIONS = (0.0, 0.5, 0.95)
SEED = 20_240_601

REPO_ROOT = Path(__file__).resolve().parents[1]

# Scenario names, in print order; tests/test_bench_smoke.py checks each is printed.
STEADY = "put steady (16 new, evicting)"
PINNED = tuple(f"put {round(p * 100)}% pinned" for p in PIN_FRACTIONS)
GET = "get_concatenated 5,000"
READ_VS_GET = "read_into vs vLLM get_concat"
READ_VS_MEMCPY = "read_into vs memcpy (*)"
READ_VS_FLOOR = "read_into vs copy floor (**)"
GATHER_VS_MEMCPY = "read_into numpy gather vs memcpy (*)"
PREFIX_GET = "prefix-hit get_concatenated"
PREFIX_READ = "prefix-hit read_into vs memcpy"
METADATA = "metadata bytes/object"
# GATHER_VS_MEMCPY is printed only when numpy is installed (the optional gather, auxstore._gather).
SCENARIOS = (
    STEADY,
    *PINNED,
    GET,
    READ_VS_GET,
    READ_VS_MEMCPY,
    READ_VS_FLOOR,
    GATHER_VS_MEMCPY,
    PREFIX_GET,
    PREFIX_READ,
    METADATA,
)


class Store(Protocol):
    """The part of vLLM's store API both sides share."""

    def put(self, objects: list[Any], *, retain_keys: Iterable[str] = (), release_keys: Iterable[str] = ()) -> None: ...

    def get_concatenated(self, keys: list[str]) -> bytes: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class Impl:
    """One side of the comparison: how to build its store and its objects."""

    name: str
    make_store: Callable[[], Store]
    make_object: Callable[[str, bytes], object]


@dataclass(frozen=True)
class Row:
    """One printed result. ``higher_is_better`` is False for times and bytes."""

    scenario: str
    unit: str
    aux: float
    vllm: float
    target: float | None  # None: no target, reported for context
    aux_samples: list[float] = field(default_factory=list)
    vllm_samples: list[float] = field(default_factory=list)

    @property
    def ratio(self) -> float:
        return self.vllm / self.aux if self.aux > 0 else float("inf")

    @property
    def met(self) -> bool | None:
        return None if self.target is None else self.ratio >= self.target


@dataclass(frozen=True)
class Config:
    repeat: int
    steady_batches: int  # puts per timed sample, steady scenario
    pinned_batches: int  # puts per timed sample, pinned scenarios (vLLM is slow there)
    read_calls: int  # reads per timed sample


DEFAULT = Config(repeat=61, steady_batches=64, pinned_batches=8, read_calls=1)
QUICK = Config(repeat=7, steady_batches=32, pinned_batches=4, read_calls=1)


# -- locating and loading the two stores ------------------------------------------------------------


def upstream_location(explicit: str | None) -> Path:
    """``--baseline``, else the spec's own locator, else the path rule of the project."""
    if explicit is not None:
        return Path(explicit)
    try:
        from auxspec.engine.target import upstream_path
    except ImportError:
        pass
    else:
        located: Path | None = upstream_path()
        if located is not None:
            return located
    env = os.environ.get("AUXSTORE_UPSTREAM")
    if env:
        return Path(env)
    return REPO_ROOT.parent / "shared" / "upstream" / "vllm_store.py"


def load_module(path: Path) -> ModuleType:
    """vLLM's module, by the spec's loader when there is one."""
    try:
        from auxspec.engine.target import load_module_from_path
    except ImportError:
        pass
    else:
        loaded: ModuleType = load_module_from_path(path)
        return loaded
    name = "_bench_vllm_store"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load vLLM's store from {path}")
    module = importlib.util.module_from_spec(spec)
    # The module defines a dataclass, which looks itself up in sys.modules.
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def vllm_impl(module: ModuleType) -> Impl:
    cls = module.BlockObjectStore
    return Impl(
        name="vLLM",
        make_store=lambda: cls(max_bytes=MAX_BYTES, object_nbytes=OBJECT_NBYTES),
        make_object=module.BlockObject,
    )


def auxstore_impl() -> Impl:
    from auxstore import BlockObject, BlockObjectStore

    return Impl(
        name="auxstore",
        make_store=lambda: BlockObjectStore(max_bytes=MAX_BYTES, object_nbytes=OBJECT_NBYTES),
        make_object=BlockObject,
    )


# Runs an iterator to exhaustion in C, keeping nothing.
_consume: Callable[[Iterable[object]], None] = deque[object](maxlen=0).extend

# -- workload ----------------------------------------------------------------------------------------

# A few hundred distinct payloads, shared by all keys: the content does not
# matter to either store, and 20,000 distinct 6 KiB bytes would only cost time.
_PAYLOADS = [bytes([i]) * OBJECT_NBYTES for i in range(251)]


def key(i: int) -> str:
    """A key shaped like a block-hash digest (32 hex characters)."""
    return f"{i:032x}"


def payload(i: int) -> bytes:
    return _PAYLOADS[i % len(_PAYLOADS)]


def batches(impl: Impl, start: int, count: int) -> list[list[object]]:
    """``count`` batches of BATCH new objects, keys ``start`` onwards."""
    make = impl.make_object
    return [[make(key(i), payload(i)) for i in range(b, b + BATCH)] for b in range(start, start + count * BATCH, BATCH)]


def fill(impl: Impl, pinned: int = 0) -> Store:
    """A full store holding keys 0..NUM_SLOTS-1 (least recent first), the first
    ``pinned`` of them retained once."""
    store = impl.make_store()
    make = impl.make_object
    for b in range(0, NUM_SLOTS, BATCH):
        idx = range(b, min(b + BATCH, NUM_SLOTS))
        store.put([make(key(i), payload(i)) for i in idx], retain_keys=[key(i) for i in idx if i < pinned])
    return store


def alternating(impls: Sequence[Any], r: int) -> list[Any]:
    """Rotate which side goes first on each repeat (A B, B A, ...)."""
    k = r % len(impls)
    return [*impls[k:], *impls[:k]]


# What `timed` reads: wall time by default; `--clock cpu` reads this thread's
# CPU time (user and system, page faults included), which leaves out the time
# spent waiting for a core, so a machine shared with other jobs skews it less.
CLOCKS: dict[str, Callable[[], int]] = {"wall": time.perf_counter_ns, "cpu": time.thread_time_ns}
_clock: list[Callable[[], int]] = [time.perf_counter_ns]


def use_clock(name: str) -> None:
    _clock[0] = CLOCKS[name]


def timed(fn: Callable[[], None]) -> int:
    """Time of ``fn`` in ns on the chosen clock, the cyclic GC off so it does not land on one side only."""
    clock = _clock[0]
    gc.collect()
    gc.disable()
    try:
        t0 = clock()
        fn()
        return clock() - t0
    finally:
        gc.enable()


def run_puts(store: Store, work: list[list[object]]) -> None:
    put = store.put
    for objects in work:
        put(objects)


def sized_impls(module: Any, slots: int, nbytes: int) -> list[Impl]:
    """auxstore and vLLM's module, each making stores of ``slots`` objects of ``nbytes``
    (bench_scale and bench_growth, which vary the size this script keeps fixed)."""
    from auxstore import BlockObject, BlockObjectStore

    vllm_cls = module.BlockObjectStore
    max_bytes = slots * nbytes
    return [
        Impl("auxstore", lambda: BlockObjectStore(max_bytes=max_bytes, object_nbytes=nbytes), BlockObject),
        Impl("vLLM", lambda: vllm_cls(max_bytes=max_bytes, object_nbytes=nbytes), module.BlockObject),
    ]


def get_into(store: Store, keys: list[str], out: list[bytes]) -> None:
    """One ``get_concatenated``, its result kept (so the timed call cannot be optimised into nothing)."""
    out.append(store.get_concatenated(keys))


# -- scenarios ---------------------------------------------------------------------------------------


def check_evicted_oldest_unpinned(name: str, store: Store, pinned: int) -> None:
    """The scenario did what it says: the pins held and eviction took the oldest unpinned key."""
    if pinned:
        store.get_concatenated([key(0), key(pinned - 1)])  # raises if a pinned key was evicted
    try:
        store.get_concatenated([key(pinned)])
    except RuntimeError:  # both BlockObjectStoreError classes derive from it: "not stored"
        return
    raise SystemExit(f"{name}: key {pinned} (the oldest unpinned) was not evicted")


def bench_puts(
    name: str, aux: Impl, vllm: Impl, cfg: Config, pinned: int, per_sample: int, target: float | None
) -> Row:
    """Steady puts of BATCH new keys into a full store (each put evicts BATCH)."""
    stores = {aux.name: fill(aux, pinned), vllm.name: fill(vllm, pinned)}
    samples: dict[str, list[float]] = {aux.name: [], vllm.name: []}
    next_key = NUM_SLOTS
    try:
        for r in range(-1, cfg.repeat):  # r == -1: warm-up, not recorded
            count = per_sample if r >= 0 else max(1, per_sample // 4)
            for impl in alternating([aux, vllm], r):
                work = batches(impl, next_key, count)
                store = stores[impl.name]
                ns = timed(functools.partial(run_puts, store, work))
                if r >= 0:
                    samples[impl.name].append(ns / count / 1000)
            next_key += count * BATCH  # both sides see the same key sequence
        for impl_name, store in stores.items():
            check_evicted_oldest_unpinned(impl_name, store, pinned)
    finally:
        for store in stores.values():
            store.close()
    return Row(
        name,
        "us/put",
        statistics.median(samples[aux.name]),
        statistics.median(samples[vllm.name]),
        target,
        samples[aux.name],
        samples[vllm.name],
    )


def _no_gather() -> None:
    return None


# The "for context" figures bench_reads returns, by the run that gives each.
_CONTEXT = {"object_copies_ms": "object_copies", "memcpy_ms": "memcpy", "bare_gather_ms": "bare_gather"}


def bench_reads(aux: Impl, vllm: Impl, cfg: Config) -> tuple[list[Row], dict[str, float]]:
    """get_concatenated on both, auxstore's read_into a reused buffer (in pure
    Python, and with numpy's one-call gather when numpy is installed), and a
    plain memcpy of the same bytes, all of the same READ_KEYS scattered keys.

    Also, for context (no target): the same bytes copied object by object
    from scattered slots of an mmap, with no bookkeeping at all, which is the
    floor for any store that copies each object separately."""
    indices = random.Random(SEED).sample(range(NUM_SLOTS), READ_KEYS)
    keys = [key(i) for i in indices]
    expected = b"".join(payload(int(k, 16)) for k in keys)
    nbytes = len(expected)
    aux_store = fill(aux)
    vllm_store = fill(vllm)
    # Pre-faulted: bytearray(n) zero-fills every page, and the warm-up writes them again.
    read_buffer = bytearray(nbytes)
    copy_buffer = bytearray(nbytes)
    copy_view = memoryview(copy_buffer)
    read_into = aux_store.read_into  # type: ignore[attr-defined]  # auxstore only; Store is the shared API
    floor_arena = mmap.mmap(-1, MAX_BYTES)
    floor_base = memoryview(floor_arena)
    for i in range(NUM_SLOTS):
        floor_base[i * OBJECT_NBYTES : (i + 1) * OBJECT_NBYTES] = payload(i)
    floor_sources = [floor_base[i * OBJECT_NBYTES : (i + 1) * OBJECT_NBYTES] for i in indices]
    floor_targets = [slice(j * OBJECT_NBYTES, (j + 1) * OBJECT_NBYTES) for j in range(READ_KEYS)]

    def aux_get() -> None:
        for _ in range(cfg.read_calls):
            aux_store.get_concatenated(keys)

    def vllm_get() -> None:
        for _ in range(cfg.read_calls):
            vllm_store.get_concatenated(keys)

    import auxstore._store as store_module

    chosen = store_module.numpy_gather  # what read_into calls to find the gather
    gather = chosen()

    def aux_read_into() -> None:  # the pure-Python copy, numpy or not
        store_module.numpy_gather = _no_gather
        try:
            for _ in range(cfg.read_calls):
                read_into(keys, read_buffer)
        finally:
            store_module.numpy_gather = chosen

    def aux_gather() -> None:  # what the store does with numpy installed
        for _ in range(cfg.read_calls):
            read_into(keys, read_buffer)

    def memcpy() -> None:
        for _ in range(cfg.read_calls):
            copy_view[:] = expected

    def object_copies() -> None:
        for _ in range(cfg.read_calls):
            _consume(map(copy_view.__setitem__, floor_targets, floor_sources))

    def bare_gather() -> None:  # one numpy.take of the same rows, no lookup, no bookkeeping: the gather's floor
        import numpy

        for _ in range(cfg.read_calls):
            rows = numpy.frombuffer(floor_base, dtype=numpy.uint8).reshape(-1, OBJECT_NBYTES)
            out = numpy.frombuffer(copy_view, dtype=numpy.uint8).reshape(-1, OBJECT_NBYTES)
            numpy.take(rows, indices, axis=0, out=out, mode="clip")
            del rows, out  # their exports of the two buffers, which are released at the end

    # A wrong read would make every number meaningless: check once, untimed.
    if aux_store.get_concatenated(keys) != expected or vllm_store.get_concatenated(keys) != expected:
        raise SystemExit("get_concatenated returned the wrong bytes")
    for read in (aux_read_into, aux_gather):
        read_buffer[:] = bytes(nbytes)
        read()
        if read_buffer != expected:
            raise SystemExit(f"{read.__name__}: read_into wrote the wrong bytes")
    object_copies()
    if copy_buffer != expected:
        raise SystemExit("the object-by-object copy is wrong")
    memcpy()

    runs: dict[str, Callable[[], None]] = {
        "aux_get": aux_get,
        "vllm_get": vllm_get,
        "aux_read_into": aux_read_into,
        "memcpy": memcpy,
        "object_copies": object_copies,
    }
    if gather is not None:
        runs["aux_gather"] = aux_gather
        bare_gather()
        if copy_buffer != expected:
            raise SystemExit("the bare numpy gather is wrong")
        runs["bare_gather"] = bare_gather
    samples: dict[str, list[float]] = {name: [] for name in runs}
    try:
        for r in range(cfg.repeat):
            for name in alternating(list(runs), r):
                samples[name].append(timed(runs[name]) / cfg.read_calls / 1e6)
    finally:
        for view in floor_sources:
            view.release()
        floor_base.release()
        floor_arena.close()
        copy_view.release()
        aux_store.close()
        vllm_store.close()
    med = {name: statistics.median(values) for name, values in samples.items()}
    rows = [
        Row(GET, "ms/call", med["aux_get"], med["vllm_get"], 1.2, samples["aux_get"], samples["vllm_get"]),
        Row(
            READ_VS_GET,
            "ms/call",
            med["aux_read_into"],
            med["vllm_get"],
            None,
            samples["aux_read_into"],
            samples["vllm_get"],
        ),
        Row(
            READ_VS_MEMCPY,
            "ms/call",
            med["aux_read_into"],
            med["memcpy"],
            None,
            samples["aux_read_into"],
            samples["memcpy"],
        ),
        # Issue 32: within 1.10x of the object-by-object copy floor, in pure Python.
        Row(
            READ_VS_FLOOR,
            "ms/call",
            med["aux_read_into"],
            med["object_copies"],
            round(1 / 1.10, 2),
            samples["aux_read_into"],
            samples["object_copies"],
        ),
    ]
    if gather is not None:  # issue 32: the one-call gather within 1.3x of one memcpy of the same bytes
        rows.append(
            Row(
                GATHER_VS_MEMCPY,
                "ms/call",
                med["aux_gather"],
                med["memcpy"],
                round(1 / 1.3, 2),
                samples["aux_gather"],
                samples["memcpy"],
            )
        )
    return rows, {name: med[run] for name, run in _CONTEXT.items() if run in med}


def bench_prefix_reads(aux: Impl, vllm: Impl, cfg: Config) -> list[Row]:
    """A prefix-cache hit: READ_KEYS keys read in the order and batches they
    were written (vLLM's common read). get_concatenated on both sides, and
    auxstore's read_into against one memcpy of the same bytes."""
    first = 7 * BATCH
    keys = [key(i) for i in range(first, first + READ_KEYS)]
    expected = b"".join(payload(i) for i in range(first, first + READ_KEYS))
    aux_store, vllm_store = fill(aux), fill(vllm)
    read_buffer = bytearray(len(expected))
    copy_view = memoryview(bytearray(len(expected)))
    read_into = aux_store.read_into  # type: ignore[attr-defined]
    if aux_store.get_concatenated(keys) != expected or vllm_store.get_concatenated(keys) != expected:
        raise SystemExit("prefix-hit get_concatenated returned the wrong bytes")
    if read_into(keys, read_buffer) != len(expected) or read_buffer != expected:
        raise SystemExit("prefix-hit read_into wrote the wrong bytes")

    def memcpy() -> None:
        copy_view[:] = expected

    def aux_get() -> None:
        aux_store.get_concatenated(keys)

    def vllm_get() -> None:
        vllm_store.get_concatenated(keys)

    def aux_read_into() -> None:
        read_into(keys, read_buffer)

    runs: dict[str, Callable[[], None]] = {
        "aux_get": aux_get,
        "vllm_get": vllm_get,
        "aux_read_into": aux_read_into,
        "memcpy": memcpy,
    }
    samples: dict[str, list[float]] = {name: [] for name in runs}
    try:
        for r in range(cfg.repeat):
            for name in alternating(list(runs), r):
                samples[name].append(timed(runs[name]) / 1e6)
    finally:
        copy_view.release()
        aux_store.close()
        vllm_store.close()
    med = {name: statistics.median(values) for name, values in samples.items()}
    return [
        Row(PREFIX_GET, "ms/call", med["aux_get"], med["vllm_get"], 1.2, samples["aux_get"], samples["vllm_get"]),
        Row(
            PREFIX_READ,
            "ms/call",
            med["aux_read_into"],
            med["memcpy"],
            0.8,
            samples["aux_read_into"],
            samples["memcpy"],
        ),
    ]


def _fresh_batches(impl: Impl) -> Iterator[list[object]]:
    # Keys are made here, under tracing, because the store keeps them alive:
    # they are part of what each stored object costs.
    make = impl.make_object
    for b in range(0, NUM_SLOTS, BATCH):
        yield [make(f"{i:032x}", payload(i)) for i in range(b, b + BATCH)]


def metadata_per_object(impl: Impl) -> tuple[float, int]:
    """Traced bytes a full store holds beyond an empty one, per object; and
    the empty store's own traced size. The mmap arena is not traced, and
    payload bytes are shared, made before tracing."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        store = impl.make_store()
        empty = tracemalloc.get_traced_memory()[0]
        for objects in _fresh_batches(impl):
            store.put(objects)
        del objects
        gc.collect()
        full = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    store.close()
    return (full - empty) / NUM_SLOTS, empty - before


def bench_metadata(aux: Impl, vllm: Impl) -> tuple[Row, dict[str, int]]:
    aux_bytes, aux_fixed = metadata_per_object(aux)
    vllm_bytes, vllm_fixed = metadata_per_object(vllm)
    return (
        Row(METADATA, "B/object", aux_bytes, vllm_bytes, 1.0, [aux_bytes], [vllm_bytes]),
        {"auxstore_empty_store_bytes": aux_fixed, "vllm_empty_store_bytes": vllm_fixed},
    )


# -- report ------------------------------------------------------------------------------------------


def fmt(value: float) -> str:
    return f"{value:.3g}" if value < 100 else f"{value:,.0f}"


def print_table(rows: list[Row]) -> None:
    head = ("scenario", "auxstore", "vLLM", "ratio", "target", "met?")
    cells = [
        (
            r.scenario,
            f"{fmt(r.aux)} {r.unit}",
            f"{fmt(r.vllm)} {r.unit}",
            f"{r.ratio:.2f}x",
            "-" if r.target is None else f">= {r.target:g}x",
            {None: "-", True: "yes", False: "NO"}[r.met],
        )
        for r in rows
    ]
    widths = [max(len(c[i]) for c in [head, *cells]) for i in range(len(head))]
    for line in [head, *cells]:
        print(
            "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths, strict=True)))
        )
    print("ratio = vLLM / auxstore (time or bytes): above 1 means auxstore is better.")
    print("(*) the vLLM column of this row is a plain memcpy of the same bytes into a pre-faulted buffer.")
    print(
        "(**) the vLLM column of this row is the object-by-object copy floor: the same objects copied one by one "
        "from scattered slots of an mmap, no lookup, no bookkeeping (target: read_into within 1.10x of it)."
    )
    print(
        "read_into rows without 'numpy' are the pure-Python copy; the numpy gather row (auxstore[fast]) is printed "
        "only when numpy is installed."
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--baseline", metavar="PATH", help="vLLM's store module (default: ../shared/upstream)")
    parser.add_argument("--repeat", type=int, metavar="N", help="timed samples per scenario and side")
    parser.add_argument("--quick", action="store_true", help="smoke run: fewer, shorter samples")
    parser.add_argument("--json", metavar="OUT", help="also write every sample and the machine's details here")
    parser.add_argument(
        "--clock", choices=sorted(CLOCKS), default="wall", help="wall time, or this thread's CPU time (shared machines)"
    )
    args = parser.parse_args(argv)
    use_clock(args.clock)

    cfg = QUICK if args.quick else DEFAULT
    if args.repeat is not None:
        if args.repeat < 1:
            parser.error("--repeat must be at least 1")
        cfg = Config(args.repeat, cfg.steady_batches, cfg.pinned_batches, cfg.read_calls)

    path = upstream_location(args.baseline)
    if not path.is_file():
        parser.error(f"vLLM's store module not found at {path} (use --baseline PATH or AUXSTORE_UPSTREAM)")
    module = load_module(path)
    vllm = vllm_impl(module)
    aux = auxstore_impl()

    started = time.perf_counter()
    print(
        f"object {OBJECT_NBYTES:,} B, {NUM_SLOTS:,} slots, batches of {BATCH}, {cfg.repeat} repeats, {args.clock} clock"
        f"{' (quick)' if args.quick else ''}; baseline {path}"
    )
    rows = [bench_puts(STEADY, aux, vllm, cfg, 0, cfg.steady_batches, 1.2)]
    for fraction, name in zip(PIN_FRACTIONS, PINNED, strict=True):
        # Only the 95% case has a target; 0% and 50% show how vLLM's cost grows.
        target = 20.0 if fraction >= 0.95 else None
        rows.append(bench_puts(name, aux, vllm, cfg, round(fraction * NUM_SLOTS), cfg.pinned_batches, target))
    read_rows, floor = bench_reads(aux, vllm, cfg)
    rows.extend(read_rows)
    rows.extend(bench_prefix_reads(aux, vllm, cfg))
    meta_row, fixed = bench_metadata(aux, vllm)
    rows.append(meta_row)
    elapsed = time.perf_counter() - started

    print_table(rows)
    print(
        f"for context: the same {READ_KEYS:,} objects copied one by one from scattered mmap slots, with no "
        f"bookkeeping, take {floor['object_copies_ms']:.3g} ms ({floor['memcpy_ms'] / floor['object_copies_ms']:.2f}x "
        f"memcpy's speed); read_into reaches {floor['object_copies_ms'] / read_rows[2].aux:.2f}x of that"
    )
    if "bare_gather_ms" in floor:
        print(
            f"for context: one numpy.take of the same rows from an mmap laid out like the arena, with no bookkeeping, "
            f"takes {floor['bare_gather_ms']:.3g} ms ({floor['bare_gather_ms'] / floor['memcpy_ms']:.2f}x one memcpy); "
            f"read_into with the gather takes {read_rows[-1].aux / floor['bare_gather_ms']:.2f}x that"
        )
    print(f"total {elapsed:.1f} s")

    if args.json:
        report = {
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "command": [Path(sys.executable).name, *sys.argv],
            "python": sys.version,
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "baseline": str(path),
            "load_average": os.getloadavg(),
            "config": vars(cfg)
            | {"object_nbytes": OBJECT_NBYTES, "num_slots": NUM_SLOTS, "batch": BATCH, "clock": args.clock},
            "elapsed_s": elapsed,
            "empty_store_bytes": fixed,
            "read_floor_ms": floor,
            "rows": [
                {
                    "scenario": r.scenario,
                    "unit": r.unit,
                    "auxstore": r.aux,
                    "vllm": r.vllm,
                    "ratio": r.ratio,
                    "target": r.target,
                    "met": r.met,
                    "auxstore_samples": r.aux_samples,
                    "vllm_samples": r.vllm_samples,
                }
                for r in rows
            ],
        }
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)  # --json /tmp/speed/run.json as the docs show it
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
