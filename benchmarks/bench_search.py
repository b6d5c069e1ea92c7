"""Where a verify search's time goes, per op: each part of the random and
guided phases timed alone on the same inputs, on the bundled store and on
vLLM's module, in one run.

    .venv/bin/python benchmarks/bench_search.py [--inputs 2400]

The inputs are the random search's (``generators.inputs``, classic and
scaled scopes in turn, seed 1). Parts, in µs of CPU time per op (best of
three rounds):

- draw: ``generators.inputs`` against Hypothesis's ``find`` over
  ``st.binary`` of the same bounds (what the search used until 2026-12-07),
  with their ratio;
- decode (``engine.codec.decode``) and the scope and domain count
  (``Reach.trace``);
- the compare (``engine.compare.compare``, every op compared whole), alone
  and with each arc recorder of the guided phase (coverage.py's C tracer,
  the Python tracer) tracing the target's calls as the phase does, with the
  recorders' ratio; and with the C tracer left on for the whole compare
  (what the phase did until 2026-12-07).

The phases' own figures (ops per second as a run reaches them) are in the
scope report: ``auxspec verify --json``, ``scope.phases``.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Callable
from random import Random
from typing import Any

from hypothesis import HealthCheck, Phase, find, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample

from auxspec.drivers.verify import SCOPES, Reach, traced_calls
from auxspec.engine.codec import SCALED, SPECIAL_SIZES, decode
from auxspec.engine.compare import compare
from auxspec.engine.target import Target, load_target, upstream_path
from auxspec.generators import guided


def _best(work: Callable[[], object], rounds: int = 3) -> float:
    best = float("inf")
    for _ in range(rounds):
        started = time.process_time()
        work()
        best = min(best, time.process_time() - started)
    return best


def _hypothesis_draws(count: int) -> list[bytes]:
    """``count`` inputs as the search drew them with Hypothesis."""
    scaled = st.tuples(st.integers(SCALED, SPECIAL_SIZES - 1), st.binary(min_size=256, max_size=4096))
    strategies = (st.binary(min_size=4, max_size=256), scaled.map(lambda drawn: bytes([drawn[0]]) + drawn[1]))
    drawn: list[bytes] = []

    def keep(data: bytes) -> bool:
        drawn.append(data)
        return False

    rng = Random(1)
    rounds = 0
    while len(drawn) < count:
        config = settings(
            max_examples=min(300, count - len(drawn)),
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
            phases=[Phase.generate],
        )
        with contextlib.suppress(NoSuchExample):
            find(strategies[rounds % 2], keep, settings=config, random=rng)
        rounds += 1
    return drawn[:count]


def _draws(count: int) -> list[bytes]:
    stream = Random(1)
    return [SCOPES[index % 2].draw(stream) for index in range(count)]


def _row(name: str, seconds: float, ops: int, note: str = "") -> None:
    print(f"  {name:42} {1e6 * seconds / ops:8.1f} µs/op  {note}")


def bench(target: Target, profile: str, inputs: list[bytes]) -> None:
    traces = [decode(data, profile, target.features) for data in inputs]
    ops = sum(len(trace.ops) for trace in traces)
    print(f"{target.label} ({profile}): {len(traces)} traces, {ops} ops")
    _row("decode", _best(lambda: [decode(data, profile, target.features) for data in inputs]), ops)

    def count() -> None:
        reach = Reach()
        for trace in traces:
            reach.trace(trace)

    _row("Reach.trace (scope and domain)", _best(count), ops)
    plain = _best(lambda: [compare(trace, target) for trace in traces])
    _row("compare", plain, ops)
    recorders: dict[str, Any] = {"coverage.py's C tracer": guided.target_arcs(), "Python tracer": guided.Arcs()}
    traced = {}
    for name, recorder in recorders.items():

        def run(recorder: Any = recorder) -> None:
            calls = traced_calls(target, recorder)  # as the guided phase drives it
            for trace in traces:
                with recorder:
                    compare(trace, calls)

        traced[name] = _best(run)
        _row(f"compare, arcs by {name}", traced[name], ops, f"(type {type(recorder).__name__})")
    c_cost, python_cost = (traced[name] - plain for name in recorders)
    print(f"  recording arcs: the C tracer costs {c_cost / python_cost:.2f}x the Python tracer's")
    whole = guided.target_arcs()

    def run_whole() -> None:  # the whole compare traced, as until 2026-12-07
        for trace in traces:
            with whole:
                sys.settrace(whole._tracer)  # the C tracer that around() would switch on, left on
                try:
                    compare(trace, target)
                finally:
                    sys.settrace(None)

    before = _best(run_whole)
    _row("compare, C tracer on the whole compare", before, ops, "(as until 2026-12-07)")
    print(f"  the target's calls traced, not the whole compare: {(before - plain) / c_cost:.2f}x less tracer cost")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--inputs", type=int, default=2400)
    args = parser.parse_args()
    inputs = _draws(args.inputs)
    total = sum(map(len, inputs))
    ours = _best(lambda: _draws(args.inputs), 1)
    theirs = _best(lambda: _hypothesis_draws(args.inputs), 1)
    ops = sum(len(decode(data).ops) for data in inputs)
    print(f"draw {args.inputs} inputs ({total} bytes, {ops} ops on auxstore):")
    _row("generators.inputs", ours, ops)
    _row("Hypothesis find(st.binary)", theirs, ops, f"({theirs / ours:.0f} times generators.inputs' cost)")
    bench(load_target(None), "strict", inputs)
    path = upstream_path()
    if path is None:
        print("vLLM's module: skipped (no ../shared/upstream beside the project)")
        return
    bench(load_target(str(path)), "upstream", inputs)


if __name__ == "__main__":
    main()
