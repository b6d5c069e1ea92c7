"""Traces over a large store: the large-store phase of ``verify``.

A store's byte offsets (slot * object_nbytes) pass 2^k only when more than
2^k bytes of objects are stored at once, which no random trace reaches. A
port whose offset arithmetic wraps at 2^31, or whose arena is cut into
chunks (auxstore's first chunk is 1 GiB) and which walks them wrongly, is
correct on every smaller store. These traces fill a store of objects of
``OBJECT_NBYTES`` bytes (an odd size, so slots straddle the powers of two at
unaligned points) whose size the caller picks (``Geometry``): the two
highest powers of two it holds, with slots wholly past the higher one. They
read runs of objects across those points, pin objects there, evict and put
new objects into the freed slots past the higher one, and read back every
stored object.

The size is the caller's because memory is: the spec holds every payload
while the target stores it, so a store of B bytes costs about 2 B of memory.
``DEFAULT_BYTES`` (offsets past 2^27 and 2^28, under 1 GB in all) is what
``verify`` runs unless told otherwise; ``FULL_BYTES`` (past 2^30 and 2^31,
about 4.5 GB) is ``verify --large-bytes 2.2e9``.

Each payload differs from every other: a key's index and generation in its
first bytes, then a random block repeated from an offset of its own. A read
of the wrong slot, or of the right slot at a wrong offset, returns other
bytes. A vector of the phase writes each payload as its head and its block
(docs/protocol.md, compact payloads), so a catch is written to ``--out``.

The ops are the op alphabet's (``engine.ops``); the model judges them like
any other trace's. ``traces`` builds one trace at a time, so only one
trace's payloads (about ``max_bytes`` bytes, shared by the trace and the
model's states) exist at once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from random import Random

from auxspec.engine.ops import PYTHON, READ_INTO, Close, Contains, Features, Get, Len, Op, Put, ReadInto, Stats
from auxspec.engine.ops import Trace as _Trace
from auxspec.engine.table import needs, step
from auxspec.models import sequential as model

OBJECT_NBYTES = 1_000_003  # odd: the slots that straddle a power of two do so at unaligned points
DEFAULT_BYTES = 330 * OBJECT_NBYTES  # 330,000,990 bytes: offsets past 2^27 and 2^28
FULL_BYTES = 2_200 * OBJECT_NBYTES  # 2,200,006,600 bytes: offsets past 2^30 and 2^31
MIN_CAPACITY = 80  # the trace's pins, runs and evictions need this many slots
PAST = 8  # slots at least wholly past the higher power of two
BATCH = 16  # objects per put while filling (16 MB a call)
# A port process takes each call as one protocol line of at most 16 MiB
# (engine.traces.MAX_LINE), payloads in hex: at most 4 objects a call.
PROCESS_BATCH = 4
READ_BACK = 16  # objects per get of the read-back: 16 MB a call, under glibc's 32 MB mmap threshold, so
# each call's result reuses freed memory instead of faulting in new pages


@dataclass(frozen=True)
class Geometry:
    """A large store: its slots, and the slots the two highest powers of two
    it holds fall in."""

    capacity: int

    @classmethod
    def of(cls, store_bytes: int) -> Geometry:
        """The store of at most ``store_bytes`` bytes (ValueError below ``MIN_CAPACITY`` objects)."""
        capacity = store_bytes // OBJECT_NBYTES
        if capacity < MIN_CAPACITY:
            raise ValueError(f"a large store needs at least {MIN_CAPACITY * OBJECT_NBYTES:,} bytes")
        return cls(capacity)

    @property
    def max_bytes(self) -> int:
        return self.capacity * OBJECT_NBYTES

    @property
    def high(self) -> int:
        """The exponent of the highest power of two with ``PAST`` slots wholly past it."""
        return ((self.capacity - PAST) * OBJECT_NBYTES).bit_length() - 1

    @property
    def straddle_low(self) -> int:
        return (1 << (self.high - 1)) // OBJECT_NBYTES

    @property
    def straddle_high(self) -> int:
        return (1 << self.high) // OBJECT_NBYTES

    @property
    def past(self) -> int:
        """The first slot wholly past 2^high."""
        return self.straddle_high + 1

    def describe(self) -> str:
        crossed = f"offsets past 2^{self.high - 1} and 2^{self.high}"
        return f"{self.max_bytes:,} bytes, objects of {OBJECT_NBYTES:,} bytes, {crossed}"


@dataclass(frozen=True)
class LargeTrace:
    """One trace of the phase: its name, and how to build it (payloads are
    made only when it is built)."""

    name: str
    build: Callable[[], _Trace]


def traces(profile: str, features: Features, seed: int, where: Geometry | None = None) -> list[LargeTrace]:
    """The phase's traces for a target with ``features``, drawn from ``seed``, over ``where``
    (``DEFAULT_BYTES`` when None)."""
    where = where or Geometry.of(DEFAULT_BYTES)
    return [
        LargeTrace(f"large-fill-evict-reput (seed {seed})", lambda: fill_evict_reput(profile, features, seed, where))
    ]


PERIOD = 4093  # a prime above the keys of a full-size trace: each key's pattern starts at its own offset


class _Payloads:
    """Distinct payloads by key index and generation (a re-put of a key
    after its eviction is generation 1): a head naming them, then a random
    block of ``PERIOD`` bytes repeated, rotated by an offset of their own.
    Every slot starts with a head no pattern byte run matches, so a read of
    the wrong slot, or of the right one at any other offset, returns other
    bytes; and a vector writes each payload as its head and its block
    (``traces.periodic_parts``), a few KB where the bytes are 1 MB."""

    def __init__(self, rng: Random, nbytes: int) -> None:
        self.nbytes = nbytes
        self.pattern = rng.randbytes(PERIOD)
        self.stride = rng.randrange(1, PERIOD)

    def __call__(self, index: int, generation: int = 0) -> bytes:
        head = f"<{index}.{generation}>".encode()
        start = (index * self.stride + generation * 7919) % PERIOD
        block = self.pattern[start:] + self.pattern[:start]
        rest = self.nbytes - len(head)
        return head + (block * (rest // PERIOD + 1))[:rest]


class _Builder:
    """Ops appended one at a time. Each is also stepped on a shadow model
    store of the same capacity with 1-byte payloads, so the generator asks
    the spec (not a copy of its rules) which keys are stored and least
    recent, without holding or joining the payloads a second time."""

    def __init__(self, profile: str, features: Features, capacity: int) -> None:
        self.most = BATCH if PYTHON in features else PROCESS_BATCH  # objects a call
        shadow = model.new(capacity, 1, profile)
        assert isinstance(shadow, model.State)
        self.shadow = shadow
        self.features = features
        self.ops: list[Op] = []

    def add(self, op: Op, shadow: Op | None = None) -> None:
        """``op``, stepped on the shadow store as ``shadow`` (``op`` itself
        when it carries no payload or buffer)."""
        self.shadow, _ = step(self.shadow, op if shadow is None else shadow)
        self.ops.append(op)

    def store(
        self, objects: tuple[tuple[str, bytes], ...], retain: tuple[str, ...] = (), release: tuple[str, ...] = ()
    ) -> None:
        """One put of ``objects``; the shadow's carries 1-byte payloads."""
        small = tuple((key, _SHADOW) for key, _ in objects)
        self.add(Put(objects, retain, release), Put(small, retain, release))

    def stored(self) -> list[str]:
        """The stored keys, least recent first (pinned ones too)."""
        return [k for k, _ in self.shadow.entries]

    def unpinned(self) -> list[str]:
        refs = dict(self.shadow.refs)
        return [k for k, _ in self.shadow.entries if k not in refs]

    def read(self, keys: list[str]) -> None:
        self.add(Get(tuple(keys)))

    def read_into(self, key: str, slack: int) -> None:
        if READ_INTO in self.features:
            self.add(ReadInto((key,), OBJECT_NBYTES + slack), Get((key,)))
        else:
            self.read([key])

    def read_back(self) -> None:
        """Every stored object, read in recency order: each payload is
        compared once and the order stays as it was."""
        keys = self.stored()
        step = min(READ_BACK, self.most)
        for start in range(0, len(keys), step):
            self.read(keys[start : start + step])

    def put(self, objects: list[tuple[str, bytes]], release: tuple[str, ...] = ()) -> None:
        """``objects`` in calls of at most ``most`` (the releases with the first)."""
        for start in range(0, len(objects), self.most):
            self.store(tuple(objects[start : start + self.most]), release=release if not start else ())

    def observe(self, *ops: Op) -> None:
        for op in ops:
            if needs(op) <= self.features:
                self.add(op)


_SHADOW = b"s"


def _key(index: int) -> str:
    return f"L{index:04d}"


def fill_evict_reput(profile: str, features: Features, seed: int, where: Geometry) -> _Trace:
    """Fill the store (pinning objects at the two straddles, 2^30 and 2^31 in
    a full-size store), read runs across them, read everything before the
    slots past the higher one (which makes those least recent), evict them
    into new objects in the freed slots, re-put an evicted key with new bytes and a stored one (first write
    wins), release the pins while new objects evict, read back every stored
    object, close."""
    rng = Random(seed)
    payload = _Payloads(rng, OBJECT_NBYTES)
    b = _Builder(profile, features, where.capacity)
    capacity, low, high, past = where.capacity, where.straddle_low, where.straddle_high, where.past
    made: dict[str, bytes] = {}

    # Pins on objects at both straddles and past the higher one, taken as they are stored.
    pins = {low - 1, low, high, past + rng.randrange(capacity - past)}
    for start in range(0, capacity, b.most):
        indices = range(start, min(start + b.most, capacity))
        batch = tuple((_key(i), payload(i)) for i in indices)
        made.update(batch)
        b.store(batch, retain=tuple(_key(i) for i in indices if i in pins))
    b.observe(Len(), Stats())

    # Runs of consecutive slots across both powers of two (in a full-size
    # store, 2^30 and 2^31, auxstore's chunk boundaries at slots 1073 and 2146),
    # ascending and descending, and a scattered read: each a different path
    # through a port's read code.
    for first, last in (
        (low - 2, low + 2),
        (high - 3, high + 3),
        (capacity - 5, capacity - 1),
        (past - 1, past),
    ):
        b.read([_key(i) for i in range(first, last + 1)])
    b.read([_key(i) for i in (capacity - 1, 0, high, low, past + 7, 5)])
    b.read([_key(i) for i in range(high + 2, high - 3, -1)])
    for index in (low, high, past + rng.randrange(capacity - past), capacity - 1):
        b.read_into(_key(index), rng.randrange(1000))

    # Put again everything stored before slot ``past`` (the same objects: a
    # stored key keeps its payload and becomes most recent, and nothing is
    # copied): the objects past the higher power of two become the least recent, and the
    # evictions below free their slots.
    early = [k for k in b.stored() if int(k[1:]) < past]
    # No payload is copied, so an in-process call takes many (a protocol line cannot).
    touch = 16 * b.most if PYTHON in features else b.most
    for start in range(0, len(early), touch):
        b.store(tuple((k, made[k]) for k in early[start : start + touch]))

    # Evict: new objects take the freed slots (past the higher power of two
    # in auxstore's and vLLM's layouts); a pinned object there stays.
    gone = b.unpinned()[: 2 * BATCH]
    fresh = [f"N{i:03d}" for i in range(2 * BATCH)]
    b.put([(k, payload(10_000 + int(k[1:]))) for k in fresh])
    for start in range(0, BATCH + 3, b.most):  # in slot order, across the calls' runs
        b.read(fresh[start : min(start + b.most, BATCH + 3)])
    b.read_into(fresh[BATCH + 5], rng.randrange(1000))
    b.read(list(reversed(fresh[BATCH:]))[: b.most])
    b.observe(Contains(gone[0]), Contains(fresh[-1]))
    b.read([gone[1]])  # evicted: missing

    # An evicted key comes back with new bytes (generation 1); a stored one
    # re-put with new bytes keeps its old ones (first write wins).
    back, kept = gone[2], b.unpinned()[capacity // 2]
    b.store(((back, payload(int(back[1:]), 1)), (kept, payload(int(kept[1:]), 1))))
    b.read([back, kept])

    # Release the pins while new objects evict past them.
    released = tuple(sorted(_key(i) for i in pins))
    more = [f"M{i:03d}" for i in range(BATCH)]
    b.put([(k, payload(20_000 + int(k[1:]))) for k in more], release=released)
    b.observe(Stats())
    b.read(list(released))
    b.read(more[:4])
    b.read_back()
    b.observe(Len())
    b.add(Close())
    b.read([more[0]])  # closed
    return _Trace(profile, where.max_bytes, OBJECT_NBYTES, tuple(b.ops))
