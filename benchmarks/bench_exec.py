"""The port protocol's cost: the same traces compared in-process and through
``--exec`` (a port process), measured in the same run.

    .venv/bin/python benchmarks/bench_exec.py '.venv/bin/auxspec serve' [--traces 400]
    .venv/bin/python benchmarks/bench_exec.py 'ports/c/auxport --batch'
    .venv/bin/python benchmarks/bench_exec.py 'ports/c/auxport --batch' --search 3000

``--search N``: verify's random phase itself (``drivers.verify.explore``,
its own draws of the scaled and classic scopes, seed ``--seed``) for N
traces through the port, against the same search in this process on the
bundled store given the port's features (so no guided phase on either side).

Random traces of the op alphabet (``engine.codec.decode``, the ops the port
declared) go through ``engine.compare.compare`` on the bundled store in this
process, then on the port, alternating, twice each. Only the compare is
timed (no Hypothesis generation, no shrinking), so what differs between
the rows is the protocol: encoding, the pipe, the port's own work, decoding.

Each row prints wall seconds and the CPU seconds of verify and of the port
process (from ``/proc``; Linux). On a loaded machine a nice'd run's wall
time swings tenfold between rows while its CPU seconds stay within about
30%, so "ops per CPU-second" (ops over verify's plus the port's CPU
seconds) is the figure to compare; the ratio is against the in-process
rows of the same run. Whether the port pipelines is what it declares
(``batch``; docs/protocol.md, "Pipelining").
"""

from __future__ import annotations

import argparse
import os
import random
import time
from dataclasses import replace
from pathlib import Path

from auxspec.drivers.protocol import ProcessTarget, process_target
from auxspec.drivers.verify import Reach, explore
from auxspec.engine.codec import decode
from auxspec.engine.compare import compare
from auxspec.engine.ops import Trace
from auxspec.engine.target import Target, load_target


def port_cpu(made: ProcessTarget) -> float:
    """CPU seconds (user + system) the port process has used so far."""
    pid = made.ports.port.process.pid
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(traces: list[Trace], target: Target, made: ProcessTarget) -> tuple[float, float, float]:
    """(wall, verify CPU, port CPU) seconds to compare every trace."""
    wall, cpu, port = time.perf_counter(), time.process_time(), port_cpu(made)
    for number, trace in enumerate(traces):
        if target.upcoming is not None:  # as verify's search does: the next trace is sent while this one is judged
            target.upcoming(traces[number + 1] if number + 1 < len(traces) else None)
        found = compare(trace, target)
        assert found is None, found.render()  # a benchmark of a conforming port
    return time.perf_counter() - wall, time.process_time() - cpu, port_cpu(made) - port


def search(count: int, seed: int, target: Target, made: ProcessTarget) -> tuple[float, float, float, int]:
    """(wall, verify CPU, port CPU, ops) of the random phase's first ``count`` traces."""
    reach = Reach()
    wall, cpu, port = time.perf_counter(), time.process_time(), port_cpu(made)
    found, _ = explore(target, "strict", 1e9, seed=seed, reach=reach, max_traces=count)
    assert found is None, found.render()  # a benchmark of a conforming port
    return time.perf_counter() - wall, time.process_time() - cpu, port_cpu(made) - port, reach.ops_run


def main_search(made: ProcessTarget, count: int, seed: int) -> None:
    here = replace(load_target(None), features=made.target.features)
    print(f"{made.target.label}: verify's random phase, {count} traces, seed {seed}")
    for label, target in (("in-process", here), ("exec", made.target)) * 2:
        wall, cpu, port, ops = search(count, seed, target, made)
        print(
            f"  {label:10}  {ops} ops  wall {wall:6.2f} s ({ops / wall:7,.0f} ops/s)  verify CPU {cpu:5.2f} s  "
            f"port CPU {port:5.2f} s"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", help="the port command, as --exec takes it")
    parser.add_argument("--traces", type=int, default=400)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--search", type=int, metavar="N", help="time verify's random phase for N traces instead")
    args = parser.parse_args()
    made = process_target(args.command)
    if args.search:
        try:
            main_search(made, args.search, args.seed)
        finally:
            made.close()
        return
    try:
        here = replace(load_target(None), features=made.target.features)
        rng = random.Random(args.seed)
        traces = [
            decode(rng.randbytes(rng.randint(50, 400)), "strict", made.target.features) for _ in range(args.traces)
        ]
        ops = sum(len(trace.ops) for trace in traces)
        pipelined = "pipelined (batch)" if getattr(made.target, "ahead", None) is not None else "one request per line"
        print(f"{args.command}: {len(traces)} traces, {ops} ops; {pipelined}")
        rates: dict[str, list[float]] = {"in-process": [], "exec": []}
        for label, target in (("in-process", here), ("exec", made.target)) * 2:
            wall, cpu, port = run(traces, target, made)
            rate = ops / (cpu + port)
            rates[label].append(rate)
            print(
                f"  {label:10}  wall {wall:6.2f} s ({ops / wall:7,.0f} ops/s)  verify CPU {cpu:5.2f} s  "
                f"port CPU {port:5.2f} s  {rate:7,.0f} ops per CPU-second"
            )
        best = max(rates["exec"]) / max(rates["in-process"])
        print(f"  exec / in-process, ops per CPU-second (best of two each): {best:.2f}")
    finally:
        made.close()


if __name__ == "__main__":
    main()
