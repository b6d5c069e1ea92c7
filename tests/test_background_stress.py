"""Real-thread stress: the writer runs free, the interpreter switches threads
as often as it can, and every owner outcome is checked against the spec.

The spec follows the owner: a put's outcome must be one the spec allows for
some writer position consistent with what was observed, and every read
(which waits for the queue) must equal the spec's exactly. Some segments end
with a failing batch, so the latch is stressed too.
"""

from __future__ import annotations

import random
import sys
import threading
import time

import pytest

from auxspec.drivers import gated
from auxspec.engine.observable import canonical
from auxspec.models import background as bg
from auxspec.models import sequential as model
from auxspec.models.sequential import Ok
from auxspec.reference import background as bgref
from auxspec.reference.store import observe
from auxstore import BackgroundBlockObjectStore, BlockObject, BlockObjectStore

OPS = 100_000
SEGMENT = 2_000  # owner ops per store
NBYTES, CAPACITY, BOUND = 8, 8, 3
KEYS = [f"k{i}" for i in range(12)]


def _outcome(error: BaseException | None, gate: gated.GatedStore, value: bytes | None, op: str) -> bg.BgOutcome | str:
    return Ok(value) if error is None else gated._observed(op, error, gate)


class Follower:
    """The spec's state alongside a store whose writer position is unknown."""

    def __init__(self, bound: int) -> None:
        inner = model.new(CAPACITY * NBYTES, NBYTES, "strict")
        assert isinstance(inner, model.State)
        state = bg.new_background(inner, bound)
        assert isinstance(state, bg.BgState)
        self.state = state

    def put(self, batch: bg.Batch, observed: bg.BgOutcome | str) -> None:
        alternatives = bg.put(self.state, batch)
        while not alternatives:  # the put returned, so the writer took a batch meanwhile
            self.state = bg.writer_step(self.state) if self.state.started else bg.writer_take(self.state)
            alternatives = bg.put(self.state, batch)
        for state, outcome in alternatives:
            if outcome == observed:
                self.state = state
                return
        raise AssertionError(f"put: observed {observed}, the spec allows {[o for _, o in alternatives]}")

    def read(self, keys: tuple[str, ...], observed: bg.BgOutcome | str) -> None:
        self.state, expected = bg.get_concatenated(self.state, keys)
        assert observed == expected, f"read {keys}: observed {observed}, the spec says {expected}"


def _segment(rnd: random.Random, ops: int, fail_at: int | None, behind: list[int]) -> int:
    gate = gated.GatedStore(
        BlockObjectStore(max_bytes=CAPACITY * NBYTES, object_nbytes=NBYTES),
        lambda s: canonical(s.snapshot()),
        gated=False,
    )
    store = BackgroundBlockObjectStore(gate, max_pending_batches=BOUND)
    spec = Follower(BOUND)
    reads = 0
    for index in range(ops):
        if rnd.random() < 0.7:
            if index == fail_at:
                objects, retains, releases = [], [], ["never-retained"]  # latched when applied
            else:
                chosen = rnd.sample(KEYS, rnd.randint(1, 3))
                objects = [BlockObject(k, bytes([rnd.randrange(256)]) * NBYTES) for k in chosen]
                retains = rnd.sample(KEYS, rnd.randint(0, 1))
                releases = retains if rnd.random() < 0.8 else []  # keep pins balanced
            error: BaseException | None = None
            try:
                store.put(objects, retain_keys=retains, release_keys=releases)
            except Exception as caught:
                error = caught
            spec.put(bgref.batch_of(objects, retains, releases), _outcome(error, gate, None, "put"))
        else:
            keys = tuple(rnd.sample(KEYS, rnd.randint(0, 2)))
            # The real writer is behind when it has applied fewer batches than
            # the read must wait for: then the read really waits.
            behind[0] += gate.finished < spec.state.applied + bg.inner_calls_to_drain(spec.state)
            value: bytes | None = None
            error = None
            try:
                value = store.get_concatenated(list(keys))
            except Exception as caught:
                error = caught
            spec.read(keys, _outcome(error, gate, value, "get"))
            reads += 1
    # The inner store as close finds it: every batch applied, up to a failure.
    # Compared in the observable form: the pinned keys' relative order is not
    # observable under strict, and the store keeps none (auxspec.engine.observable).
    expected_final = canonical(observe(bg.drain(spec.state).inner))
    error = None
    try:
        store.close()
    except Exception as caught:
        error = caught
    spec.state, expected = bg.close(spec.state)
    assert _outcome(error, gate, None, "close") == expected
    assert gate.final == expected_final
    return reads


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_stress_against_the_sequential_spec() -> None:
    rnd = random.Random(20240601)
    threads = threading.active_count()
    interval = sys.getswitchinterval()
    started = time.perf_counter()
    done = reads = 0
    behind = [0]
    sys.setswitchinterval(1e-6)  # the smallest: switch threads as often as possible
    try:
        segment = 0
        while done < OPS:
            ops = min(SEGMENT, OPS - done)
            # Every fourth store fails near its end, so the latch is stressed too.
            fail_at = ops - rnd.randint(5, 50) if segment % 4 == 3 else None
            reads += _segment(rnd, ops, fail_at, behind)
            done += ops
            segment += 1
    finally:
        sys.setswitchinterval(interval)
    elapsed = time.perf_counter() - started
    print(
        f"\nstress: {done} owner ops ({reads} reads checked, {behind[0]} while the writer was behind)"
        f" in {elapsed:.1f} s"
    )
    assert done >= OPS
    assert behind[0] > reads // 100  # the writer really ran concurrently
    assert threading.active_count() == threads
    assert sys.getswitchinterval() == interval


def test_the_follower_rejects_a_wrong_read() -> None:
    spec = Follower(BOUND)
    spec.put(bgref.batch_of([BlockObject("k0", b"\x01" * NBYTES)], [], []), Ok())
    with pytest.raises(AssertionError):
        spec.read(("k0",), Ok(b"\x02" * NBYTES))
