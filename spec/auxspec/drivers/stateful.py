"""A reusable differential Hypothesis state machine: any store against the spec.

The machine is the engine's check in Hypothesis's clothes: its rules draw
bytes, the one codec (``auxspec.engine.codec``) turns them into ops of the one
alphabet (so the machine draws what ``verify`` and the fuzzers draw, invalid
input classes included), and each op is judged by
``auxspec.engine.compare.check_step``: the outcome (the value, or the error
kind), then the observable state and, when the target has one,
``target.check_invariants()``. A difference raises
:class:`~auxspec.engine.compare.DivergenceFound`, whose message is the op
trace up to the diverging op; Hypothesis shrinks the drawn bytes, and so the
trace.

Reusing it for a port takes a few lines::

    from hypothesis import settings
    from auxspec.drivers.stateful import differential_machine

    MyStoreMachine = differential_machine(
        lambda max_bytes, object_nbytes: MyStore(max_bytes=max_bytes, object_nbytes=object_nbytes),
        profile="strict",
    )
    TestMyStore = MyStoreMachine.TestCase  # collected by pytest / unittest
    TestMyStore.settings = settings(max_examples=500, stateful_step_count=50, deadline=None)

or, to keep state of your own, subclass :class:`DifferentialMachine` and
define ``make_target(max_bytes, object_nbytes)`` (and ``observe(target)`` when
the target's state can be seen otherwise than by ``snapshot()``; vLLM's
module, for instance, is observed with ``auxspec.engine.target.observe_vllm``).
Which ops are drawn follows what the target's class offers
(``auxspec.engine.target.features_of``): ``read_into`` and the observations
only when it has them. A target without ``snapshot()`` is compared by
outcomes alone.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import replace
from typing import Any, ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule

from auxspec.engine.codec import decode
from auxspec.engine.compare import Divergence, DivergenceFound, check_step, compare, construct
from auxspec.engine.expect import expected_new, initial_state
from auxspec.engine.ops import Features, Op, Trace
from auxspec.engine.table import step
from auxspec.engine.target import Errors, Target, features_of
from auxspec.engine.traces import outcome_to_json
from auxspec.models import sequential as model
from auxspec.reference.store import Snapshot, observe

__all__ = ["DifferentialMachine", "DivergenceFound", "Factory", "differential_machine"]

Factory = Callable[[Any, Any], Any]
Observer = Callable[[Any], Snapshot]


class DifferentialMachine(RuleBasedStateMachine):
    """Compares ``make_target(...)`` with the spec of ``profile``, op by op."""

    profile: ClassVar[str] = "strict"
    # The ops drawn; None: what the target's class offers.
    features: ClassVar[Features | None] = None
    # A port's own exception classes and the error kind each stands for
    # (auxspec.engine.target.Target.errors), tried before the structural rules.
    errors: ClassVar[Errors] = ()

    def make_target(self, max_bytes: Any, object_nbytes: Any) -> Any:
        """The store under test, made with vLLM's constructor arguments."""
        raise NotImplementedError("subclass DifferentialMachine and define make_target, or use differential_machine()")

    def observe(self, target: Any) -> Snapshot | None:
        """Everything observable about ``target``, without changing it (None: it cannot be seen)."""
        snapshot = getattr(target, "snapshot", None)
        return None if snapshot is None else snapshot()

    # ------------------------------------------------------------- set-up

    @initialize(sizes=st.binary(min_size=3, max_size=3))
    def build(self, sizes: bytes) -> None:
        """The store, from the sizes the codec reads in three bytes (some cannot be built)."""
        self.header = sizes
        self.trace = decode(sizes, self.profile)
        self.store: Any = None
        self.state: model.State | None = None
        self.target = Target("the machine's target", self.make_target, self.observe, errors=self.errors)
        want = expected_new(self.trace)
        store, got = construct(self.make_target, self.trace, self.errors)
        if got != want:
            raise DivergenceFound(
                f"building store(max_bytes={self.trace.max_bytes!r}, object_nbytes={self.trace.object_nbytes!r}): "
                f"expected {outcome_to_json(want)}, got {outcome_to_json(got)}"
            )
        if store is not None:
            built = initial_state(self.trace)
            assert isinstance(built, model.State)
            self.store, self.state = store, built
            self.drawn = self.features if self.features is not None else features_of(type(store))

    def teardown(self) -> None:
        if getattr(self, "store", None) is not None:
            with contextlib.suppress(Exception):  # the trace may have closed it, or broken it
                self.store.close()

    # -------------------------------------------------------------- rules

    @rule(data=st.binary(min_size=1, max_size=48))
    def calls(self, data: bytes) -> None:
        """The ops ``data`` stands for, on the spec and on the target (none
        when the store could not be built)."""
        if self.state is None:
            return
        for op in decode(self.header + data, self.profile, self.drawn).ops:
            self._check(op)

    def _check(self, op: Op) -> None:
        __tracebackhide__ = True  # pytest: the divergence is the message, not this frame
        assert self.state is not None
        before = self.state
        self.state, want = step(self.state, op)
        broken = model.violations(self.state)
        if broken:
            raise AssertionError(f"the model broke its invariant after {op}: {broken}")
        checker = getattr(self.store, "check_invariants", None)
        found = check_step(self.store, op, want, observe(self.state), self.target, checker, self.profile)
        self.trace = Trace(self.trace.profile, self.trace.max_bytes, self.trace.object_nbytes, (*self.trace.ops, op))
        if found is not None:
            divergence = found.at(self.trace, len(self.trace.ops) - 1, want, before)
            raise DivergenceFound(_without_padding(divergence, self.target).render())


def _without_padding(divergence: Divergence, target: Target) -> Divergence:
    """The divergence on the trace with every op left out whose removal still
    diverges (one pass, front to back, on fresh stores): what Hypothesis's
    shrinking of the drawn bytes leaves in (empty puts, reads of nothing) is
    not shown. The drawn divergence when a fresh store does not repeat it."""
    shortest = divergence
    ops = list(divergence.trace.ops[: divergence.step + 1])
    at = 0
    while at < len(ops) - 1 and len(ops) <= 64:
        trace = replace(divergence.trace, ops=(*ops[:at], *ops[at + 1 :]))
        again = compare(trace, target)
        if again is not None and again.step >= 0:
            shortest, ops = again, list(again.trace.ops[: again.step + 1])
        else:
            at += 1
    return shortest


def differential_machine(
    factory: Factory,
    *,
    profile: str = "strict",
    observe: Observer | None = None,
    errors: Errors = (),
    name: str = "DifferentialStoreMachine",
) -> type[DifferentialMachine]:
    """A machine class comparing ``factory(max_bytes, object_nbytes)`` with the
    spec under ``profile``; its ``.TestCase`` is a unittest test case.

    ``observe(target)`` gives the target's snapshot; by default
    ``target.snapshot()`` when it has one. ``errors``: a port's own exception
    classes and the error kind each stands for.
    """
    if profile not in model.PROFILES:
        raise ValueError(f"unknown profile {profile!r}; expected one of {model.PROFILES}")

    def make_target(self: DifferentialMachine, max_bytes: Any, object_nbytes: Any) -> Any:
        return factory(max_bytes, object_nbytes)

    namespace: dict[str, Any] = {"profile": profile, "make_target": make_target, "errors": tuple(errors)}
    if observe is not None:
        namespace["observe"] = lambda self, target: observe(target)
    return type(name, (DifferentialMachine,), namespace)
