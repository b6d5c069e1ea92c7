"""Measure the length of the counterexample ``auxspec verify`` reports for
every buggy port of the project's set, by the phase that caught it, and
print a markdown table (docs/verifying-a-port.md, "Shrink quality").

    nice -n 10 .venv/bin/python tools/shrink_table.py --seeds 1 --max-time 60 --out shrink.md --log shrink.jsonl

The ports: every buggy port of ``tests/ports/subtle/`` (driven as its
``DRIVE`` says, held to its ``PROFILE``) and every bug of
``tests/ports/simple_port.py``. The length is the report's own
``shrink.to_entries`` (op lines of the vector written: a call made many
times in a row is one line, with ``times``), with ``shrink.to_ops`` (the
calls; a background scenario's owner calls, one entry each); a port caught
by the background exit check has no trace. One port at a time, as
``tests/ports/subtle/measure.py`` runs them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PORTS = ROOT / "tests" / "ports"
sys.path.insert(0, str(PORTS / "subtle"))
sys.path.insert(0, str(PORTS))

import measure  # type: ignore[import-not-found]  # noqa: E402  (tests/ports/subtle/measure.py)
import simple_port  # type: ignore[import-not-found]  # noqa: E402


@dataclass(frozen=True)
class Run:
    port: str
    seed: int
    result: str  # flagged, conforms, error ..., timeout
    phase: str  # the report's found_by ("" when not flagged)
    before: int | None  # ops (or owner calls) before shrinking
    after: int | None  # and after
    seconds: float
    largest: int | None = None  # the longest list of one call in the reported trace (depth catches)
    entries: int | None = None  # op lines of the written vector (a repeated call is one); None: as many as calls

    def as_json(self) -> dict[str, object]:
        return dict(self.__dict__)


def _simple_port_file(folder: Path, bug: str) -> Path:
    path = folder / f"simple_{bug.replace('-', '_')}.py"
    path.write_text(
        f"import sys\nsys.path.insert(0, {str(PORTS)!r})\n"
        f"from simple_port import make\nBlockObjectStore = make({bug!r})\n"
    )
    return path


def commands(folder: Path, max_time: float) -> list[tuple[str, list[str]]]:
    """(name, verify arguments without --seed, --out and --json) per buggy port."""
    found: list[tuple[str, list[str]]] = []
    for port in measure.discover():
        if port.kind != "buggy":
            continue
        args = measure.command(port, 0, max_time, Path("unused"))
        keep = [a for i, a in enumerate(args) if a not in ("--json",) and args[i - 1] not in ("--seed", "--out")]
        keep = [a for a in keep if a not in ("--seed", "--out")]
        found.append((port.name, keep[1:]))  # without the auxspec program: added by run()
    for bug in simple_port.BUGS:
        path = _simple_port_file(folder, bug)
        found.append(
            (f"simple_port {bug}", ["verify", str(path), "--max-time", str(max_time), "--large-stores", "off"])
        )
    return found


def run(name: str, args: list[str], seed: int, slack: float, max_time: float) -> Run:
    with tempfile.TemporaryDirectory() as tmp:
        argv = [str(measure.AUXSPEC), *args, "--seed", str(seed), "--json", "--out", str(Path(tmp) / "found.jsonl")]
        started = time.monotonic()
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=max_time + slack, cwd=ROOT)
        except subprocess.TimeoutExpired:
            return Run(name, seed, "timeout", "", None, None, time.monotonic() - started)
    seconds = time.monotonic() - started
    if done.returncode not in (0, 1):
        tail = (done.stderr.strip().splitlines() or ["?"])[-1][:80]
        return Run(name, seed, f"error rc={done.returncode}: {tail}", "", None, None, seconds)
    report = json.loads(done.stdout.strip().splitlines()[-1])
    if done.returncode == 0:
        return Run(name, seed, "conforms", "", None, None, seconds)
    shrink = report.get("shrink") or {}
    phase = report.get("found_by") or ("the background exit check" if "background_exit" in report else "?")
    if report.get("deviations"):
        phase = "the search (documented deviations)"
    after = shrink.get("to_ops")
    entries = shrink.get("to_entries", after)
    return Run(name, seed, "flagged", phase, shrink.get("from_ops"), after, seconds, entries=entries)


def depth_run(name: str, seed: int, phase_seconds: float) -> Run:
    """A depth port of ``tests/ports/depth`` through the depth phase in
    process, as verify runs it (its lives, then its own shrinking), then
    through the report pipeline verify sends every catch through
    (``verify.shrink_divergence``) and written as verify writes it; the
    phase's time is ``phase_seconds`` (not verify's share of --max-time: a
    loaded machine would cut the long life short)."""
    from auxspec import cli
    from auxspec.drivers import verify
    from auxspec.engine.fields import Batch, Keys
    from auxspec.engine.table import kind_of
    from auxspec.engine.target import load_target

    started = time.monotonic()
    target = load_target(str(PORTS / "depth" / f"{name}.py"))
    found = verify.explore_depth(target, "strict", seed, phase_seconds, frozenset())
    if found.divergence is None:
        result = "conforms" if found.complete else "not reached"
        return Run(name, seed, result, "", None, None, time.monotonic() - started)
    shrunk = verify.shrink_divergence(found.divergence, target)
    ops = shrunk.value.ops[: shrunk.failure.step + 1]
    with tempfile.TemporaryDirectory() as folder:
        entries = cli._write_shortest(shrunk.failure, Path(folder) / "found.jsonl", name, name)
    lists = [
        len(getattr(op, f.name))
        for op in ops
        for f in kind_of(op).fields
        if isinstance(f.kind, (Keys, Batch)) and isinstance(getattr(op, f.name), tuple)
    ]
    seconds = time.monotonic() - started
    return Run(name, seed, "flagged", "the depth phase", found.found_at, len(ops), seconds, max(lists or [0]), entries)


def depth_ports() -> list[str]:
    return sorted(path.stem for path in (PORTS / "depth").glob("d_*.py"))


def _phase(found_by: str) -> str:
    return "a vector" if found_by.startswith("vector ") else found_by


def _entries(run: Run) -> int | None:
    """A catch's reported length: its vector's entries (its calls when it was not written as a vector)."""
    return run.after if run.entries is None else run.entries


def table(runs: list[Run], max_time: float) -> str:
    seeds = sorted({r.seed for r in runs})
    out = [f"`auxspec verify --max-time {max_time:g}`, seeds {', '.join(map(str, seeds))}", ""]
    out += [
        "| port | seed | caught by | calls before shrinking | calls reported | entries reported | largest list |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in sorted(runs, key=lambda r: (r.port, r.seed)):
        if r.result != "flagged":
            out.append(f"| {r.port} | {r.seed} | {r.result} | | | | |")
            continue
        before = "" if r.before is None else f"{r.before:,}"
        after = "(no trace)" if r.after is None else f"{r.after:,}"
        entries = "" if _entries(r) is None else f"{_entries(r):,}"
        largest = f"{r.largest:,}" if r.largest else ""
        out.append(f"| {r.port} | {r.seed} | {_phase(r.phase)} | {before} | {after} | {entries} | {largest} |")
    lengths = [n for r in runs if (n := _entries(r)) is not None]
    out.append("")
    if lengths:
        out.append(
            f"Reported length (entries) over {len(lengths)} catches: median {statistics.median(lengths):g}, "
            f"largest {max(lengths)}, over 15: {sum(1 for n in lengths if n > 15)}."
        )
    by_phase: dict[str, list[int]] = {}
    for r in runs:
        if (n := _entries(r)) is not None:
            by_phase.setdefault(_phase(r.phase), []).append(n)
    for phase, found in sorted(by_phase.items()):
        out.append(f"- {phase}: {len(found)} catches, median {statistics.median(found):g}, largest {max(found)}")
    missed = [r for r in runs if r.result != "flagged"]
    if missed:
        out.append(f"- not flagged (no length): {', '.join(f'{r.port} (seed {r.seed}, {r.result})' for r in missed)}")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    parser.add_argument("--max-time", type=float, default=60)
    parser.add_argument("--slack", type=float, default=300, help="seconds allowed beyond --max-time per run")
    parser.add_argument("--only", nargs="*", help="port names to run (a subtle port's stem, or 'simple_port BUG')")
    parser.add_argument("--out", type=Path, help="write the table here (rewritten after every run)")
    parser.add_argument("--log", type=Path, help="append each run to this JSON Lines file")
    parser.add_argument("--render", type=Path, nargs="+", help="run nothing: the table of these --log files")
    parser.add_argument(
        "--depth", type=float, metavar="SECONDS", help="the depth ports instead, their phase in process for SECONDS"
    )
    args = parser.parse_args(argv)
    if args.render:
        logged = [Run(**json.loads(line)) for path in args.render for line in path.read_text().splitlines()]
        print(table(logged, args.max_time), end="")
        return 0
    runs: list[Run] = []
    if args.depth is not None:
        for name in depth_ports():
            if args.only and name not in args.only:
                continue
            for seed in args.seeds:
                done = depth_run(name, seed, args.depth)
                runs.append(done)
                print(f"{name} seed {seed}: {done.result} {done.before}->{done.after} (largest {done.largest}) "
                      f"in {done.seconds:.0f} s", file=sys.stderr, flush=True)  # fmt: skip
                if args.log:
                    with args.log.open("a") as log:
                        log.write(json.dumps(done.as_json()) + "\n")
        print(table(runs, args.max_time), end="")
        return 0
    with tempfile.TemporaryDirectory() as folder:
        for name, verify_args in commands(Path(folder), args.max_time):
            if args.only and name not in args.only:
                continue
            for seed in args.seeds:
                done = run(name, verify_args, seed, args.slack, args.max_time)
                runs.append(done)
                print(f"{name} seed {seed}: {done.result} {done.phase} {done.before}->{done.after} "
                      f"in {done.seconds:.0f} s", file=sys.stderr, flush=True)  # fmt: skip
                if args.log:
                    with args.log.open("a") as log:
                        log.write(json.dumps(done.as_json()) + "\n")
                if args.out:
                    args.out.write_text(table(runs, args.max_time))
    print(table(runs, args.max_time), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
