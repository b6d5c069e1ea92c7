"""Interleavings of the owner and the writer, chosen by Hypothesis.

The inner store is a ``GatedStore``: its put waits until the test gives a
permit, so Hypothesis decides where the writer stands at every owner call
(``Release`` ops), and ``auxspec.drivers.gated.run_scenario`` checks every owner
outcome against the spec, the writer's inner calls, the final inner state
against the sequential spec's, and that no thread outlives close.

The same machine runs against auxstore (strict) and vLLM's module
(upstream), and must catch four planted writer bugs.
"""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from auxspec.drivers import gated
from auxspec.engine import ops as alphabet
from auxspec.engine.target import Target
from auxspec.generators import background as scen
from auxstore import BackgroundBlockObjectStore, BlockObjectStoreError

UPSTREAM = gated.upstream_target()
needs_upstream = pytest.mark.skipif(
    UPSTREAM is None, reason="vLLM's module (../shared/upstream/vllm_store.py or $AUXSTORE_UPSTREAM) is absent"
)
MACHINE = settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.mark.timeout(240)
@MACHINE
@given(scen.scenarios("strict"))
def test_auxstore_follows_the_spec(scenario: scen.Scenario) -> None:
    gated.run_scenario(gated.auxstore_target(), scenario)


@needs_upstream
@pytest.mark.timeout(240)
@MACHINE
@given(scen.scenarios("upstream"))
def test_vllm_follows_the_upstream_spec(scenario: scen.Scenario) -> None:
    assert UPSTREAM is not None
    gated.run_scenario(UPSTREAM, scenario)


# ------------------------------------------------------------- planted writers
# Small variants of auxstore's class, each with one bug the spec forbids.


class ReadsDoNotWait(BackgroundBlockObjectStore):
    """Reads go straight to the inner store, ignoring the queue."""

    def get_concatenated(self, keys: list[str]) -> bytes:
        if self._s.stopping:
            raise RuntimeError("closed")
        self._raise_if_failed()
        joined: bytes = self._s.store.get_concatenated(keys)
        return joined


class FailureNotSticky(BackgroundBlockObjectStore):
    """A failure is reported once, then forgotten."""

    def _raise_if_failed(self) -> None:
        error = self._s.error
        if error is not None:
            self._s.error = None
            raise BlockObjectStoreError("failed") from error


class CloseDropsQueued(BackgroundBlockObjectStore):
    """close() throws away the batches still waiting."""

    def close(self) -> None:
        self._s.queue.clear()
        super().close()


class CloseSwallowsFailure(BackgroundBlockObjectStore):
    """close() never reports a latched failure."""

    def close(self) -> None:
        with contextlib.suppress(BlockObjectStoreError):
            super().close()


A, B, C = (("a", b"\x01\x01"),), (("b", b"\x02\x02"),), (("c", b"\x03\x03"),)
TOO_BIG = (("x", b"\x04\x04"), ("y", b"\x05\x05"))  # two protected keys, capacity 1

# For each bug, a minimal scenario that shows it (a regression that needs no luck).
PLANTED: list[tuple[type[BackgroundBlockObjectStore], tuple[alphabet.Op, ...]]] = [
    (ReadsDoNotWait, (alphabet.Put(A), alphabet.Get(("a",)))),
    (FailureNotSticky, (alphabet.Put(TOO_BIG), scen.Release(1), alphabet.Flush(), alphabet.Put(B), alphabet.Flush())),
    (CloseDropsQueued, (alphabet.Put(A), alphabet.Put(B), alphabet.Close())),
    (CloseSwallowsFailure, (alphabet.Put(TOO_BIG), alphabet.Close())),
]


def _search(target: Target, examples: int) -> gated.Violation | None:
    """The first violation Hypothesis finds in ``examples`` scenarios, or None."""
    found: list[gated.Violation] = []

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        report_multiple_bugs=False,
        suppress_health_check=list(HealthCheck),
    )
    @given(scen.scenarios("strict", faults=False))
    def probe(scenario: scen.Scenario) -> None:
        try:
            gated.run_scenario(target, scenario, delay=0.002)
        except gated.Violation as violation:
            found.append(violation)
            raise

    # A replay that passes (timing decides some catches) makes Hypothesis raise
    # FlakyFailure, an exception group; only whether a violation was found matters.
    with contextlib.suppress(Exception):
        probe()
    return found[0] if found else None


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("variant", "ops"), PLANTED, ids=[cls.__name__ for cls, _ in PLANTED])
def test_the_machine_catches_a_planted_bug(
    variant: type[BackgroundBlockObjectStore], ops: tuple[alphabet.Op, ...]
) -> None:
    target = gated.auxstore_target(variant, label=variant.__name__)
    # The minimal scenario fails on the variant and passes on auxstore.
    scenario = scen.Scenario("strict", 2, 2, 2, ops)
    gated.run_scenario(gated.auxstore_target(), scenario)
    # The writer is let go `delay` after a waiting call starts. At the default
    # 2 ms, an owner that loses the CPU that long under load makes its call
    # only after the writer has moved on (CloseDropsQueued's close then finds
    # the queue already empty), and the bug does not show. Half a second makes
    # that pause unlikely; a correct store passes at any delay.
    with pytest.raises(gated.Violation):
        gated.run_scenario(target, scenario, delay=0.5)
    # And Hypothesis finds it on its own.
    violation = _search(target, examples=300)
    assert violation is not None, f"the machine did not catch {variant.__name__}"
    print(f"\n{variant.__name__} caught:\n{violation}")


def test_a_correct_store_passes_the_planted_scenarios() -> None:
    # Guards the regressions above: they must fail for the bug, not the scenario.
    for _, ops in PLANTED:
        report = gated.run_scenario(gated.auxstore_target(), scen.Scenario("strict", 2, 2, 2, ops))
        assert report.steps == len(ops) + 1
