"""Verify a target store against the spec: replay vectors, explore, shrink.

Exploration draws bytes with Hypothesis and decodes them with
``ops.decode``, the same decoder the fuzzers use, so Hypothesis shrinks a
divergence to a small input and therefore a short trace.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from pathlib import Path
from random import Random

from hypothesis import HealthCheck, Phase, find, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample

from auxspec.drivers import gated
from auxspec.drivers.protocol import process_factory
from auxspec.engine import traces
from auxspec.engine.codec import decode
from auxspec.engine.compare import Divergence, compare
from auxspec.engine.ops import CORE
from auxspec.engine.target import PortBroken, Target
from auxspec.generators.background import background_scenario


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

    broken: list[PortBroken] = []

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
        except PortBroken as error:
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
    assert target.background is not None and target.observe is not None
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
            gated.run_scenario(target, background_scenario(data, profile))
        except gated.Violation:
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
            gated.run_scenario(target, background_scenario(found, profile))
        except gated.Violation as violation:
            return str(violation), tried
    return None, tried


# ----------------------------------------------------------------- targets


def exec_target(command: str, op_timeout: float = 5.0) -> tuple[Target, Callable[[], None]]:
    """A port process speaking the protocol, and how to stop it."""
    factory, port = process_factory(command, op_timeout)
    return Target(f"process {command!r}", factory, lambda store: store.snapshot(), CORE), port.close


def load_vectors(paths: Iterable[Path]) -> list[traces.Vector]:
    vectors: list[traces.Vector] = []
    for path in paths:
        files = sorted(path.rglob("*.jsonl")) if path.is_dir() else [path]
        vectors.extend(traces.load(file) for file in files)
    return vectors
