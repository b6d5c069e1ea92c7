"""Long store lives: the depth phase of ``verify``.

The other phases run many short traces over small stores; a counter kept in
16 bits, a slot index that wraps past 65,536, a fast path that switches on
above some call size, maintenance that runs every K calls, none of them
shows there. Here a few lives run long (FoundationDB's simulation and
TigerBeetle's VOPR are the models: long deterministic histories, rare paths
made common):

- the long life: a store of a few thousand slots through more than 70,000
  puts, misses, hits, distinct keys and evictions (each eviction makes room
  for new keys), one key pinned past 70,000 times and released back to zero,
  more than 1,100 capacity failures, stats read now and then;
- the wide life: a store of more than 70,000 slots filled, read, evicted
  through and pinned whole, with lists (batches, reads, ``read_into``,
  retains, releases) of every size from 1 to 5,120.

List sizes are drawn log-uniformly and swept through every power of two and
decade, up and down, so every size class is met; failures (capacity, missing
keys, over-releases) come at every size class. The rare paths are spread
through the whole life as episodes: a failed put carrying retains and
releases (its rollback), an over-release, a pin before data, a release of
a key never stored, a re-put of a pinned key with other bytes, the store
pinned whole and then released to zero in one call.

Ops are the op alphabet's (``engine.ops``) with valid inputs only. Each is
stepped on a shadow store of ``models.incremental`` (the model's semantics
in place, O(call)), so the generator asks the spec which keys are stored;
``Depth`` counts what the life reaches, every ``Life.mark`` ops, so a run cut
short by time says how deep it got.
"""

from __future__ import annotations

import itertools
import math
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from random import Random
from typing import Any, cast

from auxspec.engine.ops import (
    OBSERVE,
    PYTHON,
    READ_INTO,
    STATS,
    Close,
    Contains,
    Features,
    Get,
    Len,
    Op,
    Put,
    ReadInto,
    Stats,
    Trace,
)
from auxspec.engine.table import kind_of, step
from auxspec.generators.background import Release, Scenario, Step
from auxspec.models import incremental
from auxspec.models.sequential import Err, Outcome

ALL_FEATURES: Features = frozenset({READ_INTO, OBSERVE, STATS, PYTHON})


@dataclass(frozen=True)
class Scale:
    """How deep the lives go."""

    name: str
    long_slots: tuple[int, int]  # the long life's capacity, drawn in this range
    wide_slots: tuple[int, int]  # the wide life's
    calls: int  # the long life's puts, misses, hits, keys and evictions: each at least this
    pins: int  # the hot key's highest count
    most: int  # the longest list in a call
    failures: int  # the long life's capacity failures
    episodes: int  # rare-path episodes spread through the long life
    queued: int = 1_024  # the background life's rounds swept up to this many batches (its last round passes the bound)
    bound: tuple[int, int] = (1_100, 1_300)  # its max_pending_batches, drawn in this range
    queue_slots: tuple[int, int] = (64, 400)  # its inner store's capacity


FULL = Scale("full", (2_000, 6_000), (70_002, 76_000), 72_000, 72_000, 5_120, 1_500, 12)
SMALL = Scale("small", (12, 60), (150, 400), 500, 300, 160, 40, 4, 48, (40, 56), (12, 40))

# What the full scale must reach (the ``depth:`` line's "NOT reached" names any left short).
GOALS = {
    "touches": 70_000,
    "puts": 70_000,
    "keys": 70_000,
    "evictions": 70_000,
    "hits": 70_000,
    "misses": 70_000,
    "pins": 70_000,
    "capacity_failures": 1_100,
    "slots": 70_000,
    "key_list": 5_000,
    "read_into": 5_000,
    "queued": 1_100,  # a target with a background store only
}


@dataclass
class Depth:
    """What a life reached (the largest over the lives of a run): calls and
    keys in one store's life, the longest list of one call."""

    touches: int = 0  # stored keys moved to the most-recent end (reads, re-puts, terminal moves)
    puts: int = 0
    keys: int = 0  # distinct keys stored
    evictions: int = 0
    hits: int = 0
    misses: int = 0
    pins: int = 0  # the highest count of one key
    capacity_failures: int = 0
    slots: int = 0  # the most keys stored at once
    key_list: int = 0  # the longest list of one call (batch, read, retains, releases)
    read_into: int = 0  # the most objects of one read_into
    queued: int = 0  # the most batches queued to a background store between two reads (the writer held)

    def widen(self, other: Depth) -> None:
        for name in _NAMES:
            setattr(self, name, max(getattr(self, name), getattr(other, name)))

    def short_of(self, features: Features = ALL_FEATURES, background: bool = False) -> list[str]:
        """The goals not reached (``read_into``'s only for a target that has
        it, ``queued`` only for one with a background store)."""
        return [
            f"depth {_SHOWN.get(name, name.replace('_', ' '))} {getattr(self, name):,} < {most:,}"
            for name, most in GOALS.items()
            if getattr(self, name) < most
            and (name != "read_into" or READ_INTO in features)
            and (name != "queued" or background)
        ]

    def as_json(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in _NAMES}

    def line(self) -> str:
        """The figures, for the report (``queued`` only when a background life ran)."""
        shown = (name for name in _NAMES if name != "queued" or self.queued)
        return ", ".join(f"{_SHOWN.get(name, name.replace('_', ' '))} {getattr(self, name):,}" for name in shown)


_NAMES = tuple(f.name for f in fields(Depth))
_SHOWN = {"key_list": "list", "read_into": "read_into"}


def spec_step(live: incremental.Live, op: Op) -> Outcome:
    """``op`` stepped on ``live`` in place (the table's step, on the in-place semantics); its outcome."""
    return step(cast(Any, live), op, incremental)[1]


@dataclass
class Life:
    """One life: its name and trace, and its figures every ``mark`` ops
    (``marks[i]`` after ``(i + 1) * mark`` ops; the last after the last op)."""

    name: str
    trace: Trace
    marks: list[Depth] = field(default_factory=list)
    every: int = 1024  # ops between whole-state comparisons (each costs O(store))
    mark: int = 1000  # ops between the recorded figures

    def reached(self, ops: int) -> Depth:
        """The figures after the first ``ops`` ops (rounded down to a mark)."""
        if ops >= len(self.trace.ops):
            return self.marks[-1]
        index = ops // self.mark - 1
        return self.marks[index] if index >= 0 else Depth()


@dataclass(frozen=True)
class Plan:
    """One life, made only when it is built (a life holds a few hundred MB of ops at most)."""

    name: str
    build: Callable[[], Life]


def lives(profile: str, features: Features, seed: int, scale: Scale = FULL) -> list[Plan]:
    """The phase's lives for a target with ``features``, drawn from ``seed``."""
    rng = Random(f"depth-{seed}")
    long_seed, wide_seed = rng.getrandbits(64), rng.getrandbits(64)
    # The wide life first: few calls (a slow port, a process, gets through it
    # in its time), big ones, a store of 70,000 slots; then the long life's 160,000 calls.
    return [
        Plan("wide life", lambda: _wide_life(profile, features, Random(wide_seed), scale)),
        Plan("long life", lambda: _long_life(profile, features, Random(long_seed), scale)),
    ]


def log_uniform(rng: Random, most: int) -> int:
    """1..most, each decade about as likely as the next."""
    return min(most, max(1, int(math.exp(rng.uniform(0.0, math.log(most + 1))))))


def sweep(most: int) -> list[int]:
    """Sizes through every power of two and decade up to ``most``, a point
    between each, up and then down again."""
    up = sorted(
        {1 << k for k in range(most.bit_length()) if 1 << k <= most}
        | {10**k for k in range(7) if 10**k <= most}
        | {most}
    )
    between = [a + (b - a) // 3 for a, b in itertools.pairwise(up) if b - a > 2]
    sizes = sorted(set(up) | set(between))
    return sizes + sizes[-2::-1]


class _Builder:
    """Ops appended one at a time, each stepped on the shadow store."""

    def __init__(self, profile: str, features: Features, rng: Random, capacity: int, nbytes: int) -> None:
        self.rng, self.features, self.profile = rng, features, profile
        self.nbytes = nbytes
        self.max_bytes = capacity * nbytes + rng.randrange(nbytes)  # a remainder the store must ignore
        shadow = incremental.new(self.max_bytes, nbytes, profile)
        assert isinstance(shadow, incremental.Live)
        self.shadow = shadow
        self.ops: list[Op] = []
        self.depth = Depth()
        self.marks: list[Depth] = []
        self.seen: set[str] = set()
        self.early: list[str] = []  # keys pinned before their data (pin_early)
        self.minted = 0
        self.salt = rng.getrandbits(32)
        self.mark = 1000 if capacity < 10_000 else 8  # the wide life's calls are few and big
        self.most = 1

    # ------------------------------------------------------------ keys

    def mint(self, count: int) -> list[str]:
        first = self.minted
        self.minted += count
        return [f"k{index}" for index in range(first, first + count)]

    def payload(self, key: str, generation: int = 0) -> bytes:
        """``nbytes`` bytes of its own per key and generation: a read of the wrong slot differs."""
        head = struct.pack("<IHH", zlib.crc32(key.encode()) ^ self.salt, generation, len(key))
        body = (head + key.encode()) * (self.nbytes // (len(head) + len(key)) + 1)
        return body[: self.nbytes]

    def stored(self, key: str) -> bool:
        return key in self.shadow.order

    def recent(self, count: int, span: int) -> list[str]:
        """Up to ``count`` stored keys drawn from the last ``span`` minted (scattered, with no repeats)."""
        low = max(0, self.minted - span)
        drawn = self.rng.sample(range(low, self.minted), min(self.minted - low, count + count // 4 + 2))
        return [k for k in (f"k{index}" for index in drawn) if self.stored(k)][:count]

    def missing(self) -> str:
        """A key that is not stored: evicted, or never put."""
        if self.minted and self.rng.random() < 0.7:
            key = f"k{self.rng.randrange(self.minted)}"
            if not self.stored(key):
                return key
        return f"never-{self.rng.getrandbits(40):x}"

    # ------------------------------------------------------------- ops

    def add(self, op: Op, longest: int = 0, batch: tuple[str, ...] = ()) -> Outcome | None:
        """``op`` appended and stepped (its outcome; None when the target
        lacks it); ``longest`` is its longest list, ``batch`` the keys it puts."""
        wanted = _NEEDS.get(type(op))
        if wanted is not None and wanted not in self.features:
            return None
        live, d = self.shadow, self.depth
        clock, inserted = live.clock, len(live.order) + live.evictions
        outcome = spec_step(live, op)
        self.ops.append(op)
        d.touches += max(0, (live.clock - clock) - (len(live.order) + live.evictions - inserted))
        d.key_list = max(d.key_list, longest)
        name = kind_of(op).name
        if name == "put":
            d.puts += 1
            if batch and not isinstance(outcome, Err):
                self.seen.update(batch)
                d.keys = len(self.seen)
            d.pins = max(d.pins, live.counts.get(_HOT, 0))
            d.capacity_failures = live.capacity_failures
            d.evictions = live.evictions
            d.slots = max(d.slots, len(live.order))
        elif name in ("get", "read_into"):
            if name == "read_into" and not isinstance(outcome, Err):
                d.read_into = max(d.read_into, longest)
            d.hits, d.misses = live.hits, live.misses
        if len(self.ops) % self.mark == 0:
            self.marks.append(Depth(**d.as_json()))
        return outcome

    def put(
        self, objects: list[tuple[str, bytes]], retain: list[str] | None = None, release: list[str] | None = None
    ) -> Outcome | None:
        retained, released = tuple(retain or ()), tuple(release or ())
        longest = max(len(objects), len(retained), len(released))
        return self.add(Put(tuple(objects), retained, released), longest, tuple(k for k, _ in objects))

    def put_new(self, count: int, retain: list[str] | None = None, release: list[str] | None = None) -> list[str]:
        keys = self.mint(count)
        self.put([(k, self.payload(k)) for k in keys], retain, release)
        return keys

    def get(self, keys: list[str]) -> None:
        self.add(Get(tuple(keys)), len(keys))

    def read_into(self, keys: list[str]) -> None:
        if READ_INTO in self.features:
            slack = self.rng.choice((0, 1, self.nbytes - 1, self.nbytes * 3))
            self.add(ReadInto(tuple(keys), len(keys) * self.nbytes + slack), len(keys))
        else:
            self.get(keys)

    def observe(self) -> None:
        self.add(Stats())
        self.add(Len())

    def finish(self, name: str) -> Life:
        self.observe()
        # Every stored object read back, least recent first (the order stays):
        # the last whole-state comparison, as the close after it empties the store.
        stored = list(self.shadow.order)
        for start in range(0, len(stored), self.most):
            self.get(stored[start : start + self.most])
        self.add(Close())
        self.add(Get(("k0",)))  # closed
        self.marks.append(Depth(**self.depth.as_json()))
        # A whole-state comparison costs O(store) (a snapshot of the target, the
        # spec's observable state, both invariant checks): about one per half a
        # store's worth of ops in the long life, which is 1,024-4,096 ops (80 in
        # 165,000 calls, 0.6 CPU s on the bundled store); in the wide life one per
        # 128 calls, each a quarter second at 70,000 slots. Every op's outcome is compared.
        every = max(32, min(4096, 1 << (self.shadow.capacity.bit_length() - 1)))
        every = every if self.shadow.capacity < 10_000 else 128
        trace = Trace(self.profile, self.max_bytes, self.nbytes, tuple(self.ops))
        return Life(name, trace, self.marks, every, self.mark)

    # ------------------------------------------------------ rare paths

    def over_release(self, most: int) -> None:
        """A release list whose one key has no reference, at a random place
        (strict: nothing changes; upstream: the releases before it stay)."""
        held = [k for k in list(self.shadow.counts)[:most] if k != _HOT]
        size = log_uniform(self.rng, max(1, min(most, len(held) + 1)))
        keys = held[: size - 1]
        keys.insert(self.rng.randrange(len(keys) + 1), self.missing())
        self.put([], release=keys)

    def pin_early(self) -> None:
        """Keys pinned an episode before their data arrives and released an
        episode after it: across the life there is always a reference to a
        key not stored yet."""
        if len(self.early) >= 2:
            self.put([], release=[self.early.pop(0)])
        if self.early:
            key = self.early[-1]
            self.put([(key, self.payload(key))])
        self.early.append(self.mint(1)[0])
        self.put([], retain=self.early[-1:])

    def pin_before_data(self) -> None:
        """A key pinned before it is stored, then stored (it stays pinned),
        read, and released to zero (it moves to the most-recent end)."""
        (key,) = self.mint(1)
        self.put([], retain=[key, key])
        self.put([(key, self.payload(key))], release=[key])
        self.get([key])
        self.put([], release=[key])

    def release_never_stored(self) -> None:
        """A key referenced and released to zero without ever being stored."""
        key = f"ghost-{self.rng.getrandbits(32):x}"
        self.put([], retain=[key] * log_uniform(self.rng, 4))
        self.put([], release=[key] * self.shadow.counts.get(key, 0))

    def reput_pinned(self) -> None:
        """A stored key pinned, then put again with other bytes (first write
        wins), then released."""
        keys = self.recent(log_uniform(self.rng, 8), 4 * self.shadow.capacity)
        if not keys:
            return
        self.put([], retain=keys)
        self.put([(k, self.payload(k, 1)) for k in keys])
        self.get(keys[:1])
        self.put([], release=keys)

    def pinned_whole(self, most: int, failing: int, sizes: list[int]) -> None:
        """Every stored key pinned (retain lists of up to ``most``); then
        ``failing`` puts of new keys, one per size in ``sizes`` first, each
        a capacity failure, some carrying retains and releases (strict
        rolls them back); then every pin released to zero in as few calls
        as ``most`` allows: many keys become terminal at once."""
        stored = [k for k in self.shadow.order if k not in self.shadow.counts]
        for start in range(0, len(stored), most):
            self.put([], retain=stored[start : start + most])
        for index in range(failing):
            size = (
                sizes[index]
                if index < len(sizes)
                else (log_uniform(self.rng, most) if self.rng.random() < 0.05 else self.rng.randint(1, 3))
            )
            retain, release = None, None
            if self.rng.random() < (0.6 if size > 1_000 else 0.2):  # a rollback of counts at every size
                retain = self.mint(1) + self.recent(2, self.shadow.capacity)
            # Releases, fewer than the batch, so it still fails; under upstream a
            # failed put keeps its releases, which frees room for the next, so only the last.
            if size > 4 and self.rng.random() < 0.3 and (self.profile == "strict" or index == failing - 1):
                release = stored[: self.rng.randint(1, 4)]
            self.put_new(size, retain, release)
        held = [k for k, n in self.shadow.counts.items() if k != _HOT for _ in range(n)]
        for start in range(0, len(held), most):
            self.put([], release=held[start : start + most])
        # The keys released are now the least recent, in the order they reached
        # zero: new keys evict the first of them, and a read of the least recent
        # that remain tells a port that moved them in another order.
        self.put_new(log_uniform(self.rng, min(most, max(1, len(stored) // 2))))
        self.get(list(itertools.islice(self.shadow.order, log_uniform(self.rng, most))))


_HOT = "hot"  # the key pinned past the long life's goal
# The features an op kind needs (the generator sends no Python-only form).
_NEEDS = {ReadInto: READ_INTO, Stats: STATS, Len: OBSERVE, Contains: OBSERVE}


def _long_life(profile: str, features: Features, rng: Random, scale: Scale) -> Life:
    capacity = rng.randrange(*scale.long_slots)
    b = _Builder(profile, features, rng, capacity, rng.randrange(8, 25))
    most = b.most = scale.most
    b.put([(_HOT, b.payload(_HOT))], retain=[_HOT])
    while len(b.shadow.order) < capacity:  # fill
        b.put_new(min(log_uniform(rng, 64), capacity - len(b.shadow.order)))
    episodes = set(range(1, scale.episodes + 1))
    failures_each = -(-scale.failures // scale.episodes) + 2
    sizes = sweep(most)
    hot_up = True
    while True:
        d = b.depth
        if (
            min(d.puts, d.misses, d.hits, d.keys, d.evictions) >= scale.calls
            and not hot_up
            and not b.shadow.counts.get(_HOT)
        ):
            break
        progress = min(d.puts, d.misses) * scale.episodes // scale.calls
        if progress in episodes:  # the rare paths, spread through the life
            episodes.discard(progress)
            b.pinned_whole(most, failures_each, sizes[progress % 3 :: 3])
            b.over_release(most)
            b.pin_early()
            b.pin_before_data()
            b.release_never_stored()
            b.reput_pinned()
            b.observe()
        roll = rng.random()
        if roll < 0.44:
            draw = rng.random()
            b.put_new(1 if draw < 0.9 else rng.randint(2, 3) if draw < 0.98 else log_uniform(rng, 64))
        elif roll < 0.88:
            if rng.random() < 0.98:
                b.get([b.missing()])
            else:  # a long read with one key missing
                keys = b.recent(log_uniform(rng, min(most, capacity)), capacity)
                keys.insert(rng.randrange(len(keys) + 1), b.missing())
                b.get(keys)
        elif roll < 0.985:
            size = rng.randint(1, 6) if rng.random() < 0.99 else log_uniform(rng, most)
            keys = b.recent(min(size, capacity), capacity)
            if keys and size > len(keys):  # a key may repeat: many touches of few keys
                keys += [rng.choice(keys) for _ in range(size - len(keys))]
            b.read_into(keys) if rng.random() < 0.2 else b.get(keys)
        elif roll < 0.995:  # the hot key's count, up past the goal and down to zero
            count = log_uniform(rng, most)
            held = b.shadow.counts.get(_HOT, 0)
            if hot_up:
                b.put([], retain=[_HOT] * count)
                hot_up = held + count < scale.pins
            elif held:
                b.put([], release=[_HOT] * min(count, held))
        elif rng.random() < 0.5:
            b.observe()
        else:
            b.add(Contains(b.missing() if rng.random() < 0.5 else _HOT))
    return b.finish(f"long life ({capacity:,} slots, seed-drawn)")


def _wide_life(profile: str, features: Features, rng: Random, scale: Scale) -> Life:
    capacity = rng.randrange(*scale.wide_slots)
    b = _Builder(profile, features, rng, capacity, rng.randrange(8, 17))
    most = b.most = scale.most
    sizes = sweep(most)
    turn = 0
    while len(b.shadow.order) < capacity:  # fill, batch sizes swept up and down, then drawn
        size = sizes[turn] if turn < len(sizes) else log_uniform(rng, most)
        turn += 1
        b.put_new(min(size, capacity - len(b.shadow.order)))
    b.observe()
    for size in sizes:  # scattered reads of every size class, and one missing key in each
        b.get(b.recent(size, capacity))
        keys = b.recent(size - 1, capacity)
        keys.insert(rng.randrange(len(keys) + 1), b.missing())
        b.get(keys)
    b.read_into(b.recent(most, capacity))
    for _start in range(0, capacity, most):  # evict through the whole store, reading the new keys
        fresh = b.put_new(log_uniform(rng, most))
        b.get([rng.choice(fresh) for _ in range(log_uniform(rng, 16))])
        b.get([b.missing()])
    while b.depth.evictions < scale.calls:
        b.put_new(log_uniform(rng, most))
        if rng.random() < 0.1:
            b.read_into(b.recent(log_uniform(rng, most), capacity))
    b.read_into(b.recent(most, capacity))
    b.pin_before_data()
    b.release_never_stored()
    b.reput_pinned()
    b.pinned_whole(most, len(sizes), sizes)
    b.over_release(most)
    b.put_new(log_uniform(rng, most))
    b.read_into(b.recent(most, capacity))
    return b.finish(f"wide life ({capacity:,} slots, seed-drawn)")


@dataclass(frozen=True)
class BackgroundLife:
    """The background store's life: a scenario for the gated driver
    (``drivers.gated``: the writer held at a gate, released where the
    scenario says) and what it reaches when it runs whole."""

    name: str
    scenario: Scenario
    depth: Depth
    rounds: tuple[int, ...]  # the step each round starts at (its puts, a release, its read)

    def only(self, rounds: range) -> Scenario:
        """The scenario with only ``rounds`` of its rounds (valid: every pin
        of a round is released in it)."""
        starts = (*self.rounds, len(self.scenario.ops))
        kept = [step for r in rounds for step in self.scenario.ops[starts[r] : starts[r + 1]]]
        return replace(self.scenario, ops=tuple(kept))


def background_life(profile: str, features: Features, seed: int, scale: Scale = FULL) -> BackgroundLife:
    """A background store's life, drawn from ``seed``: rounds of batches
    queued while the writer is held, each between two reads (a read, ``len``
    or ``stats``: every one waits for the queue), the rounds' lengths swept
    through every power of two and decade up to ``scale.queued``. In a
    round the writer is released part of the way (or not at all) before
    the second read, which waits for the rest; some batches pin
    keys of the round and later ones release them. The bound
    (``max_pending_batches``) is drawn below the longest rounds, so the
    queue fills and puts wait for the writer. The last round holds more
    batches than the bound and a capacity failure near its end: the writer
    latches it deep in the queue, skips the batches behind it, and the read
    and ``close`` report it."""
    rng = Random(f"depth-background-{seed}")
    # vLLM's background store has no read_into and no observations (the
    # background search's rule too: generators.background).
    features = features if profile == "strict" else frozenset()
    capacity = rng.randrange(*scale.queue_slots)
    b = _Builder(profile, features, rng, capacity, rng.randrange(8, 17))
    bound = rng.randrange(*scale.bound)
    steps: list[Step] = []
    taken = 0

    def take() -> None:
        nonlocal taken
        steps.extend(b.ops[taken:])
        taken = len(b.ops)

    most_batch = max(1, min(8, capacity // 4))
    queued = 0
    up = sweep(scale.queued)
    sizes = [*up[: len(up) // 2 + 1], bound + rng.randint(10, 60)]
    rounds: list[int] = []
    for turn, size in enumerate(sizes):
        rounds.append(len(steps))
        last = turn == len(sizes) - 1
        fresh: list[str] = []
        pinned: list[str] = []
        fail_at = size - rng.randint(2, 9) if last else -1
        for index in range(size):
            draw = rng.random()
            if index == fail_at:  # more new keys than the store holds: a capacity failure, latched
                b.put_new(capacity + 1)
            elif draw < 0.05 and fresh and len(pinned) < capacity // 4:
                keys = rng.sample(fresh, min(len(fresh), log_uniform(rng, 3)))
                b.put([], retain=keys)
                pinned += keys
            elif draw < 0.1 and pinned:
                b.put([], release=[pinned.pop(rng.randrange(len(pinned)))])
            elif draw < 0.11:  # a pin before the data, in the same batch as other keys
                (early,) = b.mint(1)
                b.put([], retain=[early])
                pinned.append(early)
                fresh += b.put_new(1)
                b.put([(early, b.payload(early))])
                fresh.append(early)
            else:
                fresh += b.put_new(1 if draw < 0.9 else log_uniform(rng, most_batch))
        if pinned and not last:
            b.put([], release=pinned)
        # Every put of the round queues a batch (none is empty), up to the failure.
        queued = max(queued, fail_at if last else len(b.ops) - taken)
        take()
        released = 0 if rng.random() < 0.3 else log_uniform(rng, size)
        if released:
            steps.append(Release(released))
        reading = rng.random()
        keys = [fresh[0], *rng.sample(fresh, min(len(fresh), log_uniform(rng, 16))), fresh[-1]]
        if reading < 0.15:
            keys.insert(rng.randrange(len(keys) + 1), b.missing())
        if reading < 0.8 and READ_INTO in features:
            b.read_into(keys) if reading > 0.6 else b.get(keys)
        elif reading >= 0.8 and OBSERVE in features:
            b.add(Len())
        else:
            b.get(keys)
        take()
    return BackgroundLife(
        f"background life ({capacity:,} slots, max_pending_batches {bound:,}, seed-drawn)",
        Scenario(profile, b.max_bytes, b.nbytes, bound, tuple(steps)),
        Depth(queued=queued),
        tuple(rounds),
    )


def figures(made: list[Life], reached: list[int]) -> Depth:
    """The run's depth: the largest over its lives, each counted up to the ops it ran."""
    depth = Depth()
    for life, ops in zip(made, reached, strict=False):
        depth.widen(life.reached(ops))
    return depth
