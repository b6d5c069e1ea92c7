"""The scaled background scope (``generators.background.scaled_background_scenario``):
queue bounds across scales, writers held so queues fill, faults at any batch
index, long histories; the bundled store agrees with the background spec on it."""

from __future__ import annotations

import random
from typing import Any

from auxspec.drivers import gated
from auxspec.engine.ops import Bad, KeyStr, Put
from auxspec.generators.background import SCALED_BOUND, Release, Scenario, scaled_background_scenario
from auxstore import BackgroundBlockObjectStore


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


class _ExactKeyTypeBackground(BackgroundBlockObjectStore):
    """A background store whose put refuses a key that is not exactly a
    ``str`` (``type(key) is str``), rather than taking it by value."""

    def put(self, objects: Any, *, retain_keys: Any = (), release_keys: Any = ()) -> None:
        if isinstance(objects, (list, tuple)):
            for obj in objects:
                key = getattr(obj, "key", "")
                if isinstance(key, str) and type(key) is not str:
                    raise TypeError(f"key must be a str, got {type(key).__name__}")
        super().put(objects, retain_keys=retain_keys, release_keys=release_keys)


def test_str_subclass_keys_reach_the_background_store_which_takes_them_by_value() -> None:
    # Scaled scenarios carry the codec's KeyStr keys: the bundled store agrees
    # on them, and one that refuses them at put is a violation.
    rng = random.Random(4)
    found: list[Scenario] = []
    while len(found) < 4:
        scenario = scaled_background_scenario(rng.randbytes(rng.randrange(64, 1024)))
        keys = [
            obj[0]
            for op in scenario.ops
            if isinstance(op, Put) and not isinstance(op.objects, Bad)
            for obj in op.objects
            if not isinstance(obj, Bad)
        ]
        if any(type(key) is KeyStr for key in keys):
            found.append(scenario)
    violations = 0
    for scenario in found:
        gated.run_scenario(gated.auxstore_target(), scenario)
        try:
            gated.run_scenario(gated.auxstore_target(_ExactKeyTypeBackground), scenario)
        except gated.Violation:
            violations += 1
    assert violations >= 1
