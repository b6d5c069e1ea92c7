"""Exception safety of ``BlockObjectStore``: an exception at any line, or a real
signal at any moment, leaves the store as before the call, as after the whole
call, or marked broken (every later call raises ``BrokenStoreError``)."""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

import pytest

import auxstore
from auxspec.engine.observable import canonical
from auxspec.reference.store import ReferenceStore
from auxstore import BlockObject, BlockObjectStore
from auxstore import _batch as batch_module
from auxstore import _store as store_module
from injection import (
    InjectedInterrupt,
    InjectedMemoryError,
    SweepResult,
    signal_storm,
    sweep,
)

FILES = frozenset({store_module.__file__, batch_module.__file__})
Op = Callable[[BlockObjectStore], object]
Store = BlockObjectStore | ReferenceStore


def _objects(nbytes: int, *keys: str) -> list[BlockObject]:
    return [BlockObject(key, key.encode()[:1] * nbytes) for key in keys]


def _outcome(call: Callable[[], object]) -> Hashable:
    try:
        value = call()
    except Exception as error:
        return ("error", type(error).__name__)
    return ("ok", value if isinstance(value, (bytes, int, type(None))) else repr(value))


def observe(store: Store) -> Hashable:
    """Snapshot and counters (counters only while open)."""
    snapshot = canonical(store.snapshot())  # the reference lists pinned keys in recency order
    stats = None if snapshot.closed else store.stats()
    return snapshot, stats


def is_broken(store: Store) -> bool:
    broken = getattr(auxstore, "BrokenStoreError", None)
    if broken is None:
        return False
    try:
        store.flush()
    except broken:
        pass
    except Exception:
        return False
    else:
        return False
    calls: list[Callable[[], object]] = [
        lambda: store.put([]),
        lambda: store.get_concatenated([]),
        lambda: store.read_into([], bytearray()),
        lambda: len(store),
        lambda: "a" in store,
        store.stats,
        store.close,
        store.close,
    ]
    for call in calls:
        try:
            call()
        except broken as error:
            assert "interrupted" in str(error), error
            continue
        return False
    return True


def references(store: Store) -> tuple[tuple[str, int], ...]:
    return store.snapshot().references


def follow_up(store: Store) -> Hashable:
    nbytes = store.object_nbytes
    keys = [key for key, _ in store.snapshot().entries]
    return (
        _outcome(lambda: store.put(_objects(nbytes, "p"))),
        _outcome(lambda: store.get_concatenated([*keys, "p"])),
        _outcome(lambda: store.read_into(keys, bytearray(nbytes * len(keys)))),
        _outcome(lambda: store.put(_objects(nbytes, "q", "r"), release_keys=[k for k, _ in references(store)])),
        observe(store),
        _outcome(store.close),
        observe(store),
    )


@dataclass
class StoreScenario:
    name: str
    the_call: Op
    setup_ops: list[Op] = field(default_factory=list)
    capacity: int = 4
    object_nbytes: int = 4

    def setup(self) -> BlockObjectStore:
        store = BlockObjectStore(max_bytes=self.capacity * self.object_nbytes, object_nbytes=self.object_nbytes)
        for op in self.setup_ops:
            with contextlib.suppress(Exception):  # a setup op may fail on purpose
                op(store)
        return store

    def call(self, target: BlockObjectStore) -> object:
        return self.the_call(target)

    observe = staticmethod(observe)

    def check(self, target: BlockObjectStore) -> None:
        target.check_invariants()

    is_broken = staticmethod(is_broken)
    follow_up = staticmethod(follow_up)


def _put(*keys: str, retain: tuple[str, ...] = (), release: tuple[str, ...] = (), nbytes: int = 4) -> Op:
    return lambda store: store.put(_objects(nbytes, *keys), retain_keys=list(retain), release_keys=list(release))


def _get(*keys: str) -> Op:
    return lambda store: store.get_concatenated(list(keys))


def _read_into(*keys: str, size: int | None = None, nbytes: int = 4) -> Op:
    def op(store: BlockObjectStore) -> object:
        buffer = bytearray(nbytes * len(keys) if size is None else size)
        return store.read_into(list(keys), buffer)

    return op


def _read_into_view(*keys: str, nbytes: int) -> Op:
    return lambda store: store.read_into(list(keys), memoryview(bytearray(nbytes * len(keys))))


BIG = 4096  # read_into copies objects this big one by one
FULL = [_put("a", "b"), _put("c", "d", retain=("c",))]  # a, b evictable; c pinned; d evictable
SCENARIOS = [
    StoreScenario("put new keys", _put("a", "b", "a")),
    StoreScenario("put re-put and new", _put("b", "x"), [_put("a", "b")]),
    StoreScenario("put evicting", _put("x", "y"), FULL),
    StoreScenario("put evicting all it can", _put("x", "y", "z"), FULL),
    StoreScenario("put capacity failure", _put("x", "y", "z", "w"), FULL),
    StoreScenario("put pins only", _put(retain=("a", "c", "n"), release=("c",)), FULL),
    StoreScenario("put release to terminal", _put("x", release=("c",)), FULL),
    StoreScenario("put terminal batch key evicted", _put("a", "x", "y", "z", release=("t",)), [_put(retain=("t",))]),
    StoreScenario("put terminal batch key", _put("t", "x", retain=("t",), release=("t", "t")), FULL),
    StoreScenario("put over-release", _put("x", release=("a",)), FULL),
    StoreScenario("put bad payload", lambda s: s.put([BlockObject("x", b"12345")]), FULL),
    StoreScenario("put bytearray payloads", lambda s: s.put([BlockObject("x", bytearray(b"1234"))]), FULL),  # type: ignore[arg-type]
    StoreScenario("put capacity one", _put("x"), [_put("a")], capacity=1),
    StoreScenario("get", _get("a", "c", "a", "d"), FULL),
    StoreScenario("get missing", _get("a", "zz"), FULL),
    StoreScenario("read_into", _read_into("b", "c", "a"), FULL),
    StoreScenario("read_into short buffer", _read_into("b", "c", size=5), FULL),
    StoreScenario(
        "read_into big objects",
        _read_into_view("b", "a", "c", nbytes=BIG),
        [_put("a", "b", nbytes=BIG), _put("c", retain=("c",), nbytes=BIG)],
        object_nbytes=BIG,
    ),
    StoreScenario("close", lambda s: s.close(), FULL),
    StoreScenario("close closed", lambda s: s.close(), [*FULL, lambda s: s.close()]),
    StoreScenario("put after close", _put("x"), [lambda s: s.close()]),
]


def _sweep_all(exc_type: type[BaseException], opcodes: bool) -> SweepResult:
    total = SweepResult(f"store sweep ({exc_type.__name__}, at each {'bytecode' if opcodes else 'line'})")
    for scenario in SCENARIOS:
        result = sweep(scenario, FILES, exc_type, opcodes=opcodes)
        print(result)
        total.add(result)
    print(total)
    return total


@pytest.mark.parametrize(
    ("exc_type", "opcodes"),
    [(InjectedInterrupt, False), (InjectedMemoryError, False), (InjectedInterrupt, True)],
)
def test_an_exception_anywhere_leaves_the_store_before_after_or_broken(
    exc_type: type[BaseException], opcodes: bool
) -> None:
    total = _sweep_all(exc_type, opcodes)
    assert total.points > (5000 if opcodes else 1000)  # the scenarios reach the store's code
    assert total.after > 0 and total.before > 0
    assert not total.bad, "\n".join(total.bad[:20])


# ------------------------------------------------------------ real signals


class ReferenceStepper:
    """Random store calls, each checked against a ReferenceStore."""

    KEYS = ("a", "b", "c", "d", "e", "f")

    def __init__(self) -> None:
        self.ref = ReferenceStore(max_bytes=16, object_nbytes=4)
        self.before = self.ref.state
        self.outcome: Hashable = None

    def new(self) -> BlockObjectStore:
        self.ref = ReferenceStore(max_bytes=16, object_nbytes=4)
        return BlockObjectStore(max_bytes=16, object_nbytes=4)

    def step(self, target: BlockObjectStore, rng: random.Random) -> Callable[[], object]:
        keys = self.KEYS
        roll = rng.random()
        op: Callable[[Store], object]
        if roll < 0.5:
            batch = _objects(4, *rng.choices(keys, k=rng.randint(0, 3)))
            retain = rng.choices(keys, k=rng.randint(0, 2))
            release = rng.choices(keys, k=rng.randint(0, 1))

            def op(store: Store) -> object:
                return store.put(batch, retain_keys=retain, release_keys=release)
        elif roll < 0.75:
            wanted = rng.choices(keys, k=rng.randint(0, 4))

            def op(store: Store) -> object:
                return store.get_concatenated(wanted)
        elif roll < 0.99:
            wanted = rng.choices(keys, k=rng.randint(0, 4))

            def op(store: Store) -> object:
                return store.read_into(wanted, bytearray(16))
        else:

            def op(store: Store) -> object:
                return store.close()

        self.before = self.ref.state
        self.outcome = _outcome(lambda: op(self.ref))
        self.after = self.ref.state
        return lambda: op(target)

    def settle(self, target: BlockObjectStore, interrupted: bool, outcome: object) -> str | None:
        try:
            target.check_invariants()
        except AssertionError as error:
            return f"invariants: {error}"
        if interrupted and is_broken(target):
            return "broken"
        seen = observe(target)
        after = observe(self.ref)
        if interrupted:
            self.ref._state = self.before
            if seen == observe(self.ref):
                return None
            self.ref._state = self.after
            return None if seen == after else f"interrupted: neither before nor after: {seen!r}"
        got = ("error", type(outcome).__name__) if isinstance(outcome, Exception) else ("ok", outcome)
        if got != self.outcome:
            return f"outcome {got!r}, reference {self.outcome!r}"
        if seen != after:
            return f"state {seen!r}, reference {after!r}"
        if seen[0].closed:
            return "new"  # a closed store is done: start a new one
        return None


def test_real_signals_leave_the_store_before_after_or_broken() -> None:
    result = signal_storm(ReferenceStepper(), seconds=5.0, max_delay=60e-6)
    print(f"real-signal run: {result}")
    assert result.interrupted > 100
    assert not result.bad, "\n".join(result.bad)


# ------------------------------------------------------- broken and stale marks


def test_a_change_that_cannot_be_completed_breaks_the_store_for_every_later_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = BlockObjectStore(max_bytes=16, object_nbytes=4)
    store.put(_objects(4, "a"))

    def fails(self: BlockObjectStore, plan: object) -> None:
        self._lru.clear()  # half done, and the completion fails again
        raise InjectedMemoryError("no memory")

    monkeypatch.setattr(BlockObjectStore, "_apply_put", fails)
    monkeypatch.setattr(BlockObjectStore, "_apply_simple_put", fails)  # the plan of this put is a simple one
    with pytest.raises(InjectedMemoryError):
        store.put(_objects(4, "b"))
    monkeypatch.undo()
    assert is_broken(store)
    with pytest.raises(auxstore.BrokenStoreError, match=r"interrupted put\(\)"):
        store.get_concatenated(["a"])
    with pytest.raises(auxstore.BrokenStoreError), store:
        pass
    # Leaving a with block because of the exception that broke the store shows that exception.
    with pytest.raises(KeyError), BlockObjectStore(max_bytes=4, object_nbytes=4) as other:
        other._gate = "put!"
        raise KeyError("the original problem")


def test_a_mark_left_outside_the_changes_is_stale_and_cleared() -> None:
    store = BlockObjectStore(max_bytes=16, object_nbytes=4)
    store.put(_objects(4, "a"))
    store._gate = "put"  # as an exception just before put's last line leaves it
    assert store.get_concatenated(["a"]) == b"aaaa"
    assert store._gate is None
