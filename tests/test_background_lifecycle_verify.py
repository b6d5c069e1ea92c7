"""``auxspec verify``'s background phase checks what happens when a store is
dropped (the ``drop`` ending of a scenario): planted lifecycle bugs are each
flagged, and the bundled store and vLLM's module conform.

Each planted port is a copy of auxstore's ``_background.py`` with one change,
loaded as a module of its own, so module-level functions (the finalizer, the
writer's loop) can be changed as a mutant would change them.
"""

from __future__ import annotations

import random
import threading
import time
import types
from pathlib import Path

import pytest

from auxspec.drivers import gated, verify
from auxspec.engine.target import Target
from auxspec.generators.background import background_scenario, scaled_background_scenario

SOURCE = Path(gated.__file__).resolve().parents[3] / "impl" / "auxstore" / "_background.py"
WAIT = 1.0  # the driver's bound on a dropped store's writer, shortened to keep the file quick
LINGER = 2.0  # how long the lingering writer outlives its store: twice WAIT, then it ends
BUDGET = 1.0  # seconds of the background phase per store

# name -> (what the bug does, the text replaced, its replacement)
BUGS: dict[str, tuple[str, str, str]] = {
    "drop-loses-queued": (
        "a dropped store throws away the batches still queued",
        "    shared.dropped = True\n    shared.stopping = True\n",
        "    shared.dropped = True\n    shared.queue.clear()\n    shared.stopping = True\n",
    ),
    "drop-closes-early": (
        "a dropped store closes its inner store at once, under the writer's remaining puts",
        "    shared.writer_wake.put(None)\n    if shared.writer_done or",
        "    shared.writer_wake.put(None)\n    _close_orphan(shared)\n    if shared.writer_done or",
    ),
    "drop-leaves-writer": (
        "a dropped store's writer closes the inner store but keeps running",
        "            if not queue:\n                return  # stopping",
        "            if not queue:\n                if shared.dropped:\n                    _close_orphan(shared)\n"
        f"                    threading.Event().wait({LINGER})\n                return  # stopping",
    ),
    "drop-closes-again": (
        "dropping a closed store closes its inner store a second time",
        '            shared.latch(WriterDiedError("the background writer thread ended with batches not applied"))\n'
        "        _close_orphan(shared)",
        '            shared.latch(WriterDiedError("the background writer thread ended with batches not applied"))\n'
        "        shared.store.close()",
    ),
}


def _port(bug: str) -> type:
    """auxstore's background store with ``bug`` planted, as a fresh module's class."""
    _, old, new = BUGS[bug]
    text = SOURCE.read_text()
    assert text.count(old) == 1, f"{bug}: the text to replace is not in _background.py once"
    module = types.ModuleType(f"_background_{bug.replace('-', '_')}")
    exec(compile(text.replace(old, new), f"<{bug}>", "exec"), module.__dict__)
    background: type = module.BackgroundBlockObjectStore
    return background


@pytest.fixture(autouse=True)
def _short_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gated, "DROP_WAIT", WAIT)


def _explore(target: Target, profile: str) -> str | None:
    found, tried = verify.explore_background(target, profile, BUDGET, seed=4)
    assert tried > 0
    return None if found is None else found.violation


def test_a_share_of_strict_scenarios_end_in_a_drop_and_no_upstream_one_does() -> None:
    rng = random.Random(5)
    for scope, share in ((background_scenario, 1 / 3), (scaled_background_scenario, 1 / 4)):
        inputs = [rng.randbytes(rng.randrange(8, 200)) for _ in range(600)]
        drops = [s for s in map(scope, inputs) if s.ending == "drop"]
        assert abs(len(drops) / len(inputs) - share) < 0.08, (scope.__name__, len(drops))
        # With batches queued and pins among them (puts of retain keys), so there is something to apply.
        assert any(len([op for op in s.ops if getattr(op, "retain", ())]) for s in drops)
        assert all(scope(data, "upstream").ending == "close" for data in inputs[:100])


@pytest.mark.timeout(60)
@pytest.mark.parametrize("bug", BUGS)
def test_each_planted_lifecycle_bug_is_flagged(bug: str) -> None:
    target = gated.auxstore_target(_port(bug), label=bug)
    violation = _explore(target, "strict")
    assert violation is not None, f"{bug} ({BUGS[bug][0]}) was not flagged"
    assert "drops the store" in violation, violation
    # The lingering writer ends by itself; wait for it so no test after this one counts it.
    deadline = time.monotonic() + LINGER + 1
    for thread in threading.enumerate():
        if thread.name == "auxstore-background-writer":
            thread.join(max(0.0, deadline - time.monotonic()))


@pytest.mark.timeout(60)
def test_the_bundled_store_conforms_with_drop_endings() -> None:
    assert _explore(gated.auxstore_target(), "strict") is None


UPSTREAM = gated.upstream_target()


@pytest.mark.timeout(60)
@pytest.mark.skipif(
    UPSTREAM is None, reason="vLLM's module (../shared/upstream/vllm_store.py or $AUXSTORE_UPSTREAM) is absent"
)
def test_vllms_module_conforms_under_upstream() -> None:
    assert UPSTREAM is not None
    assert _explore(UPSTREAM, "upstream") is None
