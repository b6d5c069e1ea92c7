"""Every writer schedule of every short owner trace (small-scope hypothesis).

Owner traces of 1 to 4 calls over a small alphabet that reaches every
branch of the background semantics (a put that evicts, one that fails for
capacity, one that fails for an unreferenced release, a read, close), each
followed by the final close; capacity 2 and ``max_pending_batches=2``, so up
to 3 batches are outstanding and a fourth put blocks. For each trace every
schedule is enumerated depth first (how many batches the writer has applied
before each call, as Loom and Shuttle enumerate interleavings) and run on
the real store with a gated writer, each checked against the spec.
"""

from __future__ import annotations

import itertools
import time

import pytest

from auxspec.drivers import gated
from auxspec.engine import ops as alphabet
from auxspec.engine.target import Target
from auxspec.generators import background as scen
from auxspec.models import background as bg
from auxspec.models import sequential as model

PUT_A = alphabet.Put((("a", b"\x01\x01"),))
PUT_BC = alphabet.Put((("b", b"\x02\x02"), ("c", b"\x03\x03")))  # evicts a when a is stored
TOO_BIG = alphabet.Put((("x", b"\x04\x04"), ("y", b"\x05\x05"), ("z", b"\x06\x06")))  # capacity failure
UNREFERENCED = alphabet.Put(release=("q",))  # release without a reference
GET_A = alphabet.Get(("a",))
ALPHABET: tuple[bg.OwnerCall, ...] = (PUT_A, PUT_BC, TOO_BIG, UNREFERENCED, GET_A, alphabet.Close())
MAX_BYTES, OBJECT_NBYTES, BOUND = 4, 2, 2


def _all_schedules(profile: str, longest: int) -> list[tuple[alphabet.Op, ...]]:
    inner = model.new(MAX_BYTES, OBJECT_NBYTES, profile)
    assert isinstance(inner, model.State)
    start = bg.new_background(inner, BOUND)
    assert isinstance(start, bg.BgState)
    found: list[tuple[alphabet.Op, ...]] = []
    for length in range(1, longest + 1):
        for calls in itertools.product(ALPHABET, repeat=length):
            # The final close is a call too: where the writer stands at it matters.
            for ops in scen.writer_schedules(start, (*calls, alphabet.Close())):
                found.append(ops[:-1])
    return found


def _explore(target: Target, profile: str, longest: int) -> dict[str, int]:
    totals = {"schedules": 0, "blocked_puts": 0, "waiting_calls": 0, "inflight_puts": 0, "inner_calls": 0}
    started = time.perf_counter()
    for ops in _all_schedules(profile, longest):
        # The implicit final close of run_scenario takes the schedule's last
        # Release when there is one: it is in ops already.
        report = gated.run_scenario(target, scen.Scenario(profile, MAX_BYTES, OBJECT_NBYTES, BOUND, ops), delay=0.0005)
        totals["schedules"] += 1
        for name in ("blocked_puts", "waiting_calls", "inflight_puts", "inner_calls"):
            totals[name] += getattr(report, name)
    print(f"\n{target.label}: explored {totals} in {time.perf_counter() - started:.1f} s")
    return totals


def test_schedules_are_enumerated_exactly() -> None:
    # Two puts then the final close: the writer can stand at 0 or 1 applied
    # batch before the second put, and at 0..2 before close.
    schedules = list(scen.writer_schedules(_start(), (PUT_A, PUT_A, alphabet.Close())))
    r1, r2 = scen.Release(1), scen.Release(2)
    assert schedules == [
        (PUT_A, PUT_A, alphabet.Close()),
        (PUT_A, PUT_A, r1, alphabet.Close()),
        (PUT_A, PUT_A, r2, alphabet.Close()),
        (PUT_A, r1, PUT_A, alphabet.Close()),
        (PUT_A, r1, PUT_A, r1, alphabet.Close()),
    ]
    # A failure ends the writer's work: nothing to release behind it.
    after_failure = list(scen.writer_schedules(_start(), (TOO_BIG, PUT_A, alphabet.Close())))
    assert (TOO_BIG, r1, PUT_A, alphabet.Close()) in after_failure
    assert all(op != r2 for ops in after_failure for op in ops[ops.index(PUT_A) :] if ops.index(PUT_A) > 1)


def _start() -> bg.BgState:
    inner = model.new(MAX_BYTES, OBJECT_NBYTES, "strict")
    assert isinstance(inner, model.State)
    start = bg.new_background(inner, BOUND)
    assert isinstance(start, bg.BgState)
    return start


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_every_schedule_of_auxstore() -> None:
    totals = _explore(gated.auxstore_target(), "strict", longest=4)
    assert totals["schedules"] == 7114  # every trace of up to 4 calls, every schedule
    # The bounds are reached: a put blocks on a full queue, reads wait, a
    # put meets an in-flight failure.
    assert totals["blocked_puts"] > 0 and totals["waiting_calls"] > 0 and totals["inflight_puts"] > 0


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_every_schedule_of_vllm() -> None:
    target = gated.upstream_target()
    if target is None:
        pytest.skip("vLLM's module (../shared/upstream/vllm_store.py or $AUXSTORE_UPSTREAM) is absent")
    totals = _explore(target, "upstream", longest=4)
    assert totals["schedules"] == 7114 and totals["blocked_puts"] > 0 and totals["inflight_puts"] > 0
