"""Verify a target store against the spec: replay vectors, explore, shrink.

Exploration draws bytes with Hypothesis and decodes them with
``ops.decode``, the same decoder the fuzzers use, so Hypothesis shrinks a
divergence to a small input and therefore a short trace.
"""

from __future__ import annotations

import contextlib
import importlib
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from random import Random
from types import ModuleType
from typing import Any

from hypothesis import HealthCheck, Phase, find, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample

from auxspec import binding, traces
from auxspec.model import Outcome
from auxspec.ops import (
    CORE,
    OBSERVE,
    PYTHON,
    READ_INTO,
    Features,
    Op,
    Trace,
    apply,
    construct,
    decode,
    describe,
    expected_new,
    expected_outcomes,
    outcome_to_json,
)
from auxspec.protocol import ProtocolError
from auxstore import StoreSnapshot

Observe = Callable[[Any], StoreSnapshot]


@dataclass(frozen=True)
class Target:
    """A store implementation to verify: how to build one and, when it can be
    seen without changing it, how to snapshot it."""

    label: str
    factory: Callable[[Any, Any], Any]
    observe: Observe | None
    # Which ops its traces may hold (auxspec.ops.Features): vLLM's store has
    # no read_into and no observations; a port process gets no Python forms.
    features: Features = CORE
    background: Callable[..., Any] | None = None  # its BackgroundBlockObjectStore class, if any


@dataclass(frozen=True)
class Divergence:
    """The first step at which a target and the spec disagree."""

    trace: Trace
    step: int  # index into trace.ops; -1: the constructor
    expected: str
    actual: str
    want: Outcome | None = None  # the spec's outcome at that step

    @property
    def op(self) -> Op | None:
        return self.trace.ops[self.step] if self.step >= 0 else None

    @property
    def deviation(self) -> str | None:
        """The documented strict-vs-vLLM deviation this falls under, if any."""
        if self.trace.profile != "strict":
            return None
        from auxspec.deviations import deviation

        return deviation(self.op, self.want)

    def render(self) -> str:
        where = "building the store" if self.step < 0 else f"step {self.step + 1} of {len(self.trace.ops)}"
        rows = [f"divergence at {where}:"]
        rows.append(
            f"  store(max_bytes={self.trace.max_bytes}, object_nbytes={self.trace.object_nbytes}, "
            f"profile={self.trace.profile})"
        )
        for index, op in enumerate(self.trace.ops[: self.step + 1]):
            mark = ">>" if index == self.step else "  "
            rows.append(f"{mark} {index + 1:>3}. {describe(op)}")
        rows.append(f"  expected: {self.expected}")
        rows.append(f"  actual:   {self.actual}")
        return "\n".join(rows)


def _show(outcome: Outcome, snapshot: StoreSnapshot | None) -> str:
    text = str(outcome_to_json(outcome))
    if snapshot is not None:
        keys = [k for k, _ in snapshot.entries]
        text += f"; stored {keys}, refs {dict(snapshot.references)}"
    return text


def compare(trace: Trace, target: Target) -> Divergence | None:
    """Run ``trace`` on the spec and on ``target``; the first disagreement."""
    want_new = expected_new(trace)
    try:
        store, got_new = construct(target.factory, trace)
    except ProtocolError:
        raise
    except Exception as error:
        shown = f"constructor raised {_exception_line(error)}"
        return Divergence(trace, -1, str(outcome_to_json(want_new)), shown, want_new)
    if got_new != want_new:
        return Divergence(trace, -1, str(outcome_to_json(want_new)), str(outcome_to_json(got_new)), want_new)
    if store is None:
        return None
    try:
        wrong = _wrong_geometry(store, trace)
        if wrong:
            return Divergence(trace, -1, "the store's sizes are the spec's", wrong, want_new)
        checker = getattr(store, "check_invariants", None)  # ports may offer it (auxstore does)
        for step, (op, (want, want_snapshot)) in enumerate(zip(trace.ops, expected_outcomes(trace), strict=True)):
            try:
                got = apply(store, op)
            except ProtocolError:
                raise  # a broken port process, not a divergence
            except Exception as error:
                return Divergence(trace, step, _show(want, None), f"unexpected {_exception_line(error)}", want)
            broken = _broken_invariant(checker)
            if broken:
                return Divergence(trace, step, "the target's invariants hold", broken, want)
            try:
                got_snapshot = target.observe(store) if target.observe else None
            except ProtocolError:
                raise
            except Exception as error:  # a state the observer cannot even read is wrong
                return Divergence(trace, step, _show(want, None), f"snapshot failed: {_exception_line(error)}", want)
            if got != want or (got_snapshot is not None and got_snapshot != want_snapshot):
                shown = _show(want, want_snapshot if got_snapshot else None)
                return Divergence(trace, step, shown, _show(got, got_snapshot), want)
        try:
            repr(store)  # whatever state the trace left it in
        except Exception as error:
            last = len(trace.ops) - 1
            return Divergence(trace, last, "repr(store) works", f"repr raised {_exception_line(error)}")
        return None
    finally:
        with contextlib.suppress(Exception):  # the trace may have closed it, or shown a failure
            store.close()


def _wrong_geometry(store: Any, trace: Trace) -> str | None:
    """What differs between the sizes a new store reports (those of
    ``object_nbytes``, ``capacity`` and vLLM's ``num_slots`` it has) and the spec's."""
    nbytes, max_bytes = binding.as_size(trace.object_nbytes), binding.as_size(trace.max_bytes)
    assert isinstance(nbytes, int) and isinstance(max_bytes, int)  # the store was built
    expected = {"object_nbytes": nbytes, "capacity": max_bytes // nbytes, "num_slots": max_bytes // nbytes}
    for name, want in expected.items():
        got = getattr(store, name, want)
        if got != want:
            return f"{name} is {got!r}, the spec says {want}"
    return None


def _broken_invariant(checker: Callable[[], None] | None) -> str | None:
    """What the target's ``check_invariants()`` (if it has one) raised."""
    if checker is None:
        return None
    try:
        checker()
    except Exception as error:
        return f"check_invariants() failed: {_exception_line(error)}"
    return None


def _exception_line(error: BaseException) -> str:
    return "".join(traceback.format_exception_only(type(error), error)).strip()


def replay(vector: traces.Vector, target: Target) -> Divergence | None:
    """Replay a vector's trace; its recorded expectations must match the spec's
    (``auxspec vectors --check`` proves that) and the target must match both."""
    return compare(vector.trace, target)


def explore(
    target: Target,
    profile: str,
    max_time: float,
    seed: int | None = None,
    progress: Callable[[int, float], None] | None = None,
    round_size: int = 300,
    known: frozenset[str] = frozenset(),
) -> tuple[Divergence | None, int]:
    """Search for a divergence for about ``max_time`` seconds; return the
    shrunk divergence (or None) and how many traces were tried. Divergences
    that fall under a deviation in ``known`` do not count."""
    deadline = time.monotonic() + max_time
    tried = 0

    broken: list[ProtocolError] = []

    def diverges(data: bytes) -> bool:
        nonlocal tried
        if broken:
            return False
        tried += 1
        if progress and tried % 2000 == 0:
            progress(tried, max(deadline - time.monotonic(), 0.0))
        if time.monotonic() > deadline:
            return False
        try:
            found = compare(decode(data, profile, target.features), target)
            return found is not None and found.deviation not in known
        except ProtocolError as error:
            broken.append(error)  # stop searching; reported once find() returns
            return False

    # find() stops at the first divergence and shrinks it; short rounds, each
    # with its own random stream, keep the search inside the time box.
    config = settings(
        max_examples=round_size,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.generate, Phase.shrink],
    )
    strategy = st.binary(min_size=4, max_size=256)
    rng = Random(seed)
    while time.monotonic() < deadline:
        try:
            found = find(strategy, diverges, settings=config, random=Random(rng.getrandbits(64)))
        except NoSuchExample:
            if broken:
                raise broken[0] from None
            continue
        return compare(decode(found, profile, target.features), target), tried
    return None, tried


def explore_background(
    target: Target,
    profile: str,
    max_time: float,
    seed: int | None = None,
    progress: Callable[[int, float], None] | None = None,
) -> tuple[str | None, int]:
    """Search the target's background store for a schedule the background
    spec does not allow (the writer held at a gate, as the background fuzzer
    does, with the same decoding); the shrunk violation's report, or None,
    and how many scenarios were tried."""
    from auxspec import background as bg
    from auxspec.fuzzing import background_scenario

    assert target.background is not None and target.observe is not None
    make_background = target.background
    driven = bg.Target(
        target.label,
        target.factory,
        target.observe,
        lambda inner, bound: make_background(inner, max_pending_batches=bound),
    )
    deadline = time.monotonic() + max_time
    tried = 0

    def violates(data: bytes) -> bool:
        nonlocal tried
        tried += 1
        if progress and tried % 50 == 0:
            progress(tried, max(deadline - time.monotonic(), 0.0))
        if time.monotonic() > deadline:
            return False
        try:
            bg.run_scenario(driven, background_scenario(data, profile))
        except bg.Violation:
            return True
        return False

    config = settings(
        max_examples=50,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.generate, Phase.shrink],
    )
    rng = Random(seed)
    while time.monotonic() < deadline:
        try:
            found = find(st.binary(max_size=200), violates, settings=config, random=Random(rng.getrandbits(64)))
        except NoSuchExample:
            continue
        try:
            bg.run_scenario(driven, background_scenario(found, profile))
        except bg.Violation as violation:
            return str(violation), tried
    return None, tried


# ----------------------------------------------------------------- targets


def exec_target(command: str, op_timeout: float = 5.0) -> tuple[Target, Callable[[], None]]:
    """A port process speaking the protocol, and how to stop it."""
    from auxspec.protocol import process_factory

    factory, port = process_factory(command, op_timeout)
    return Target(f"process {command!r}", factory, lambda store: store.snapshot(), CORE), port.close


def load_target(spec: str | None) -> Target:
    """``None``: the bundled auxstore; ``path/to/file.py``; ``module:Class``;
    or a module exposing ``BlockObjectStore``."""
    if spec is None:
        import auxstore

        bundled: Any = auxstore.BlockObjectStore
        return Target(
            "auxstore.BlockObjectStore",
            _factory(bundled),
            _observer(bundled, auxstore),
            features_of(bundled),
            auxstore.BackgroundBlockObjectStore,
        )
    module: ModuleType
    if spec.endswith(".py"):
        from auxspec.targets import load_module_from_path

        module = load_module_from_path(Path(spec))
        cls = _store_class(module, spec)
        return Target(
            f"{spec}:{cls.__name__}",
            _factory(cls),
            _observer(cls, module),
            features_of(cls),
            getattr(module, "BackgroundBlockObjectStore", None),
        )
    name, _, attr = spec.partition(":")
    try:
        module = importlib.import_module(name)
    except ImportError as error:
        raise LookupError(f"cannot import {name!r}: {error}") from None
    if attr:
        cls = getattr(module, attr, None)
        if not callable(cls):
            raise LookupError(f"{name!r} has no class {attr!r}")
    else:
        cls = _store_class(module, spec)
    background = getattr(module, "BackgroundBlockObjectStore", None) if not attr else None
    return Target(f"{name}:{cls.__name__}", _factory(cls), _observer(cls, module), features_of(cls), background)


_OBSERVATIONS = ("flush", "stats", "__len__", "__contains__", "__enter__", "__exit__")


def features_of(cls: Any) -> Features:
    """The ops a Python store class can be driven with: every form and shape
    of the Python API, ``read_into`` if it has one, the observations if it
    has them all."""
    found = {PYTHON}
    if hasattr(cls, "read_into"):
        found.add(READ_INTO)
    if all(hasattr(cls, name) for name in _OBSERVATIONS):
        found.add(OBSERVE)
    return frozenset(found)


def _store_class(module: ModuleType, spec: str) -> Any:
    cls = getattr(module, "BlockObjectStore", None)
    if cls is None:
        raise LookupError(f"{spec} has no BlockObjectStore; name the class as module:Class")
    return cls


def _factory(cls: Any) -> Callable[[Any, Any], Any]:
    def build(max_bytes: int, object_nbytes: int) -> Any:
        return cls(max_bytes=max_bytes, object_nbytes=object_nbytes)

    return build


def _observer(cls: Any, module: ModuleType) -> Observe | None:
    if hasattr(cls, "snapshot"):
        return lambda store: store.snapshot()
    if hasattr(cls, "_evict_to_fit"):  # vLLM's module: read its private fields
        from auxspec.targets import observe_vllm

        return observe_vllm
    return None


def load_vectors(paths: Iterable[Path]) -> list[traces.Vector]:
    vectors: list[traces.Vector] = []
    for path in paths:
        files = sorted(path.rglob("*.jsonl")) if path.is_dir() else [path]
        vectors.extend(traces.load(file) for file in files)
    return vectors
