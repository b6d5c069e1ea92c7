"""Conformance of a port as pytest tests, in three lines.

A test file of a port's own test suite::

    from auxspec.pytest import conformance

    conformance("mypkg.store:MyStore")

or, with no test file at all, ``pytest --auxspec-target mypkg.store:MyStore``
(the ``pytest11`` plugin, ``auxspec.pytest_plugin``). Either defines:

- ``test_auxspec_vector[<name>]``: each bundled conformance vector of the
  profile that the port can run, one test id per vector;
- ``TestAuxspecDifferential``: the differential state machine
  (``auxspec.drivers.stateful``), Hypothesis drawing op sequences through the
  one codec, judged op by op and shrunk to a short op trace on a failure;
- ``test_auxspec_background``: the background store's writer schedules
  (``auxspec.drivers.gated``), when a background class is given or the
  target's module has ``BackgroundBlockObjectStore``.

What is compared follows what the port offers (docs/verifying-a-port.md,
"What each capability adds"): outcomes always, by error kind; the state
after every op when it has ``snapshot()``; its own ``check_invariants()``
when it has one; ``read_into`` and the observations when it has them. A
port whose exceptions are its own classes names them with ``errors=``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from auxspec.drivers import gated, verify
from auxspec.drivers.stateful import differential_machine
from auxspec.engine.table import trace_needs
from auxspec.engine.target import Target, errors_of, features_of, load_attribute, load_target
from auxspec.generators.background import background_scenario
from auxspec.models.sequential import PROFILES, Kind

__all__ = ["conformance", "target_of"]

BUNDLED_VECTORS = Path(__file__).with_name("vectors")

TargetSpec = str | type | Callable[[Any, Any], Any]


def conformance(
    target: TargetSpec,
    *,
    profile: str = "strict",
    errors: Mapping[type[BaseException], str | Kind] | None = None,
    background: str | Callable[..., Any] | None = None,
    max_examples: int = 100,
    step_count: int = 20,
    background_examples: int = 30,
    vectors: Iterable[Path] | None = None,
    namespace: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Define the conformance tests of ``target`` in the calling module (or
    in ``namespace``) and return them by name.

    ``target``: ``"module:Class"``, a module exposing ``BlockObjectStore``, a
    ``path/to/file.py``, a class, or a factory ``(max_bytes, object_nbytes)
    -> store``. ``errors``: the port's own exception classes and the error
    kind (``"capacity"``, ``"missing"``, ``"unreferenced"``, ``"closed"``,
    ``"payload"``, ``"type"``, ``"buffer"``, ``"config"``) each stands for.
    ``background``: ``"module:Class"`` or a callable ``(inner,
    max_pending_batches=) -> store``. ``max_examples`` and ``step_count``: the
    machine's Hypothesis settings (each step draws a few ops);
    ``background_examples``: writer schedules tried. ``vectors``: vector
    files or folders instead of the bundled ones.
    """
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; expected one of {', '.join(PROFILES)}")
    found = target_of(target, errors, background)
    paths = list(vectors) if vectors is not None else [BUNDLED_VECTORS / profile]
    tests = _tests(found, profile, paths, max_examples, step_count, background_examples)
    where = namespace if namespace is not None else sys._getframe(1).f_globals
    where.update(tests)
    return tests


def target_of(
    target: TargetSpec,
    errors: Mapping[type[BaseException], str | Kind] | None = None,
    background: str | Callable[..., Any] | None = None,
) -> Target:
    """The ``Target`` a ``conformance`` argument names."""
    if isinstance(target, str):
        found = load_target(target)
    elif isinstance(target, type):
        found = Target(
            f"{target.__module__}:{target.__qualname__}",
            lambda max_bytes, object_nbytes: target(max_bytes=max_bytes, object_nbytes=object_nbytes),
            _snapshot_of(target),
            features_of(target),
        )
    elif callable(target):
        cls = type(_probe(target))
        found = Target(getattr(target, "__qualname__", repr(target)), target, _snapshot_of(cls), features_of(cls))
    else:
        raise TypeError(f"conformance() takes module:Class, a path, a class or a factory, not {type(target).__name__}")
    if errors:
        found = replace(found, errors=errors_of(errors))
    if background is not None:
        found = replace(found, background=_background(background))
    return found


# ------------------------------------------------------------------ tests


def _tests(
    target: Target, profile: str, paths: list[Path], examples: int, steps: int, schedules: int
) -> dict[str, Any]:
    loaded = [v for v in verify.load_vectors(paths) if v.trace.profile == profile]
    usable = [v for v in loaded if trace_needs(v.trace) <= target.features]

    @pytest.mark.parametrize("vector", usable, ids=[v.name or f"vector{i}" for i, v in enumerate(usable, 1)])
    def test_auxspec_vector(vector: Any) -> None:
        """One conformance vector, replayed on the port."""
        divergence = verify.replay(vector, target)
        if divergence is not None:
            pytest.fail(f"{target.label} fails vector {vector.name}:\n{divergence.render()}", pytrace=False)

    machine = differential_machine(
        target.factory,
        profile=profile,
        observe=target.observe,  # type: ignore[arg-type]  # None from it: nothing to compare, as without
        errors=target.errors,
        name="AuxspecDifferential",
    )
    case = machine.TestCase
    case.settings = settings(
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    tests: dict[str, Any] = {"test_auxspec_vector": test_auxspec_vector, "TestAuxspecDifferential": case}
    if target.background is not None:
        tests["test_auxspec_background"] = _background_test(target, profile, schedules)
    return tests


def _background_test(target: Target, profile: str, schedules: int) -> Callable[..., None]:
    if target.observe is None:

        def skipped() -> None:
            pytest.skip("the background store is checked through the inner store's snapshot(); the port has none")

        return skipped

    @settings(max_examples=schedules, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.binary(max_size=200))
    def schedules_agree(data: bytes) -> None:
        """One writer schedule of the background store (a ``gated.Violation`` shows the trace)."""
        gated.run_scenario(target, background_scenario(data, profile))

    return schedules_agree


# ----------------------------------------------------------------- helpers


def _probe(factory: Callable[[Any, Any], Any]) -> Any:
    """One store from ``factory``, to see its class (then closed)."""
    store = factory(64, 8)
    close = getattr(store, "close", None)
    if callable(close):
        close()
    return store


def _snapshot_of(cls: type) -> Callable[[Any], Any] | None:
    if hasattr(cls, "snapshot"):
        return lambda store: store.snapshot()
    return None


def _background(background: str | Callable[..., Any]) -> Callable[..., Any]:
    if not isinstance(background, str):
        return background
    cls = load_attribute(background if ":" in background else f"{background}:BackgroundBlockObjectStore")
    if not callable(cls):
        raise LookupError(f"{background!r} is not a class")
    return cls  # type: ignore[no-any-return]
