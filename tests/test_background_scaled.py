"""The scaled background scope (``generators.background.scaled_background_scenario``):
queue bounds across scales, writers held so queues fill, faults at any batch
index, long histories; the bundled store agrees with the background spec on it."""

from __future__ import annotations

import random

from auxspec.drivers import gated
from auxspec.engine.ops import Put
from auxspec.generators.background import SCALED_BOUND, Release, scaled_background_scenario


def _batches(ops: tuple[object, ...]) -> int:
    return sum(1 for op in ops if isinstance(op, Put) and (op.objects or op.retain or op.release))


def test_the_scaled_scope_draws_bounds_faults_and_histories_across_scales() -> None:
    rng = random.Random(12)
    bounds: set[int] = set()
    fault_at: list[int] = []
    held_long = longest = 0
    for _ in range(600):
        scenario = scaled_background_scenario(rng.randbytes(rng.randrange(64, 2048)))
        assert isinstance(scenario.max_pending_batches, int)
        bounds.add(scenario.max_pending_batches)
        fault_at += [index for index, _ in scenario.faults]
        batches = _batches(scenario.ops)
        longest = max(longest, batches)
        if not any(isinstance(op, Release) for op in scenario.ops) and batches > scenario.max_pending_batches + 1:
            held_long += 1  # the writer never let go: the queue fills and later puts wait on it
    assert min(bounds) == 1 and SCALED_BOUND - 8 <= max(bounds) <= SCALED_BOUND
    assert len({b for b in bounds if b > 8}) >= 10  # every scale, not two ends
    assert min(fault_at) == 0 and max(fault_at) > 64
    assert longest > 100 and held_long >= 20


def test_the_bundled_background_store_agrees_on_scaled_scenarios() -> None:
    target = gated.auxstore_target()
    rng = random.Random(3)
    for _ in range(25):
        gated.run_scenario(target, scaled_background_scenario(rng.randbytes(rng.randrange(64, 1024))))
