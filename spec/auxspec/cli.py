"""The ``auxspec`` command.

Exit codes: 0 the target conforms (or the vectors check out), 1 a divergence
was found, 2 a usage, file or target error.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import replace
from importlib import metadata
from pathlib import Path
from typing import Any

from auxspec import vectors
from auxspec.drivers import verify
from auxspec.drivers.protocol import ProtocolError, main_serve, parse_command, process_target
from auxspec.engine import traces
from auxspec.engine.codec import decode
from auxspec.engine.compare import Divergence, compare
from auxspec.engine.deviations import DEVIATIONS
from auxspec.engine.expect import expected_outcomes
from auxspec.engine.ops import Trace
from auxspec.engine.table import describe, trace_needs
from auxspec.engine.target import Target, load_target
from auxspec.engine.traces import TraceError, outcome_to_json, printable
from auxspec.generators import exhaustive
from auxspec.teach import cli as teach_cli

BUNDLED_VECTORS = Path(__file__).with_name("vectors")
REGRESSIONS = BUNDLED_VECTORS / "regressions"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="auxspec", description="Verify auxiliary-output stores against the spec.")
    parser.add_argument("--version", action="version", version=f"auxspec {_version()}")
    commands = parser.add_subparsers(dest="command", required=True)

    check = commands.add_parser(
        "verify",
        help="verify a store implementation against the spec",
        description="Replay the conformance vectors on TARGET, then search for a divergence for --max-time "
        "seconds. On a divergence, print the shrunk trace, write it as a vector file and exit 1.",
    )
    check.add_argument(
        "target",
        nargs="?",
        help="module:Class, a module exposing BlockObjectStore, or a path to a .py file "
        "(default: the bundled auxstore.BlockObjectStore)",
    )
    check.add_argument(
        "--exec",
        dest="exec_command",
        metavar="CMD",
        type=_command,
        help="verify a port process speaking docs/protocol.md (split as a shell would, not run by one)",
    )
    check.add_argument(
        "--op-timeout", type=_seconds(positive=True), default=5.0, help="seconds a port process may take per op"
    )
    check.add_argument("--profile", choices=("strict", "upstream"), default="strict")
    check.add_argument(
        "--max-time", type=_seconds(positive=False), default=30.0, help="seconds of exploration (default 30)"
    )
    check.add_argument("--seed", type=int, help="make the exploration repeatable")
    check.add_argument("--vectors", type=Path, action="append", help="vector file or folder (default: bundled)")
    check.add_argument("--out", type=Path, default=Path("divergence.jsonl"), help="where a divergence is written")
    check.add_argument("--json", action="store_true", help="print a JSON report instead of text")
    check.add_argument(
        "--keep-going",
        action="store_true",
        help="after a divergence that is a documented deviation of vLLM from strict (docs/deviations.md), "
        "record it and search on for the others, so a vLLM-like target's report lists them all",
    )
    check.add_argument(
        "--exact-order",
        action="store_true",
        help="also compare the recency order of keys with a reference (no call can observe it under strict; "
        "under upstream it is always compared)",
    )

    again = commands.add_parser(
        "reproduce",
        help="turn a fuzzer finding into a readable trace and a regression vector",
        description="Decode FILE (a fuzzer input) with the op alphabet, show each op with the spec's outcome "
        "and state, show where TARGET diverges, and write the trace as a vector that the tests replay.",
    )
    again.add_argument("file", type=Path, help="a crash-*, timeout-* or corpus file written by a fuzzer")
    again.add_argument("--target", help="as for verify (default: the bundled store)")
    again.add_argument("--profile", choices=("strict", "upstream"), default="strict")
    again.add_argument(
        "--out", type=Path, default=REGRESSIONS, help=f"folder the vector is written to (default {REGRESSIONS})"
    )

    vec = commands.add_parser(
        "vectors",
        help="write or check the conformance vectors",
        description="--check: every vector file must still match the spec; prints the branch coverage of the "
        "model that the vectors reach and fails below --min-coverage. --generate: rewrite the catalog vectors.",
    )
    vec.add_argument("folder", nargs="?", type=Path, default=BUNDLED_VECTORS)
    mode = vec.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true")
    mode.add_argument("--generate", action="store_true")
    vec.add_argument("--min-coverage", type=_percent, default=100.0, help="percent (default 100)")

    serve = commands.add_parser(
        "serve",
        help="answer the port protocol on stdin/stdout for a Python target",
        description="Expose TARGET (as for verify) over the JSON Lines protocol of docs/protocol.md.",
    )
    serve.add_argument("target", nargs="?")

    teach_cli.add_commands(commands)  # explain, play: auxspec/teach/cli.py
    args = parser.parse_args(argv)
    if args.command in teach_cli.COMMANDS:
        return teach_cli.run(args)
    if args.command == "serve":  # exit codes: docs/protocol.md
        try:
            return main_serve(args.target)
        except (LookupError, OSError, ImportError) as error:
            print(f"auxspec: {error}", file=sys.stderr)
            return 2
    if args.command == "vectors":
        return _vectors(args)
    if args.command == "verify":
        return _verify(args)
    if args.command == "reproduce":
        return _reproduce(args)
    return 2  # pragma: no cover - argparse rejects unknown commands


def _verify(args: argparse.Namespace) -> int:
    report: dict[str, Any] = {"profile": args.profile}
    stop_port: Any = None
    try:
        if args.exec_command is not None and args.target:
            raise LookupError("give a TARGET or --exec CMD, not both")
        vector_paths = args.vectors or ([BUNDLED_VECTORS] if BUNDLED_VECTORS.is_dir() else [])
        vectors = [v for v in verify.load_vectors(vector_paths) if v.trace.profile == args.profile]
        if args.exec_command is not None:  # started last: nothing after it can fail and leave it running
            port = process_target(args.exec_command, args.op_timeout)
            target, stop_port = port.target, port.close
            # What the handshake leaves out, said before anything runs.
            skipped = port.handshake.skipped()
            left_out = sum(1 for v in vectors if not trace_needs(v.trace) <= target.features)
            if left_out:
                skipped.append(f"{left_out} of {len(vectors)} vectors need what the port does not offer")
            report["protocol"] = port.handshake.protocol
            report["capabilities"] = sorted(port.handshake.capabilities)
            report["skipped"] = skipped
            for line in skipped:
                _say(args.json)(f"port: {line}")
        else:
            target = load_target(args.target)
        if args.exact_order:
            target = replace(target, exact_order=True)
    except ProtocolError as error:
        print(f"auxspec: the port broke the protocol: {error}", file=sys.stderr)
        return 2
    except (LookupError, TraceError, OSError, ImportError) as error:
        print(f"auxspec: {error}", file=sys.stderr)
        return 2
    try:
        return _check(args, target, vectors, report)
    except ProtocolError as error:
        print(f"auxspec: the port broke the protocol: {error}", file=sys.stderr)
        return 2
    finally:
        if stop_port:
            stop_port()


def _check(args: argparse.Namespace, target: Target, vectors: list[traces.Vector], report: dict[str, Any]) -> int:
    say = _say(args.json)
    report["target"] = target.label
    say(f"verifying {target.label} against the {args.profile} spec")

    # A divergence that is a documented deviation of vLLM from strict is
    # recorded and the search goes on for others; any other divergence ends it.
    deviations: dict[str, Divergence] = {}
    started = time.monotonic()
    # Vectors that use what the target lacks (read_into, observations, Python forms) are left out.
    usable = [v for v in vectors if trace_needs(v.trace) <= target.features]
    for number, vector in enumerate(usable, start=1):
        divergence = verify.replay(vector, target)
        if divergence:
            say(f"vector {printable(vector.name)} ({number}/{len(usable)}) diverges")
            if divergence.deviation is None or not args.keep_going:
                return _diverged(args, report, divergence, say)
            deviations.setdefault(divergence.deviation, divergence)
    report["vectors"] = len(usable)
    say(f"{len(usable)} vectors replayed ({time.monotonic() - started:.1f} s)")

    def progress(tried: int, left: float) -> None:
        if sys.stdout.isatty():  # a log gets one line per phase, not one per round
            say(f"  explored {tried} traces, {left:.0f} s left")

    # A target with a background store gives a third of the time to its
    # interleavings; the rest goes to the sequential store: first every trace
    # of the small scope (a quarter of that time at most), then the search.
    background = target.background is not None and target.observe is not None
    sequential_time = args.max_time * (2 / 3 if background else 1)
    deadline = time.monotonic() + sequential_time
    reach = verify.Reach()
    report["scope"] = reach
    started, ops_before = time.monotonic(), reach.ops_run
    while True:
        divergence, small = verify.exhaust(target, args.profile, sequential_time / 4, frozenset(deviations), reach)
        if divergence is None or divergence.deviation is None or not args.keep_going:
            break
        deviations[divergence.deviation] = divergence
    reach.phase(
        "exhaustive",
        small.traces,
        time.monotonic() - started,
        reach.ops_run - ops_before,
        states=small.states,
        complete=small.complete,
    )
    say(
        f"small scope ({exhaustive.DEPTH} ops over keys {', '.join(exhaustive.KEYS)}, capacity "
        f"{'-'.join(map(str, exhaustive.CAPACITIES))}): {small.traces} traces, {small.states} states, "
        + ("complete" if small.complete else "NOT complete (out of time)")
    )
    if divergence is not None and (divergence.deviation is None or not args.keep_going):
        report["explored"] = small.traces
        return _diverged(args, report, divergence, say)
    explored = 0
    started, ops_before = time.monotonic(), reach.ops_run
    while (left := deadline - time.monotonic()) > 0:
        divergence, tried = verify.explore(
            target, args.profile, left, args.seed, progress, known=frozenset(deviations), reach=reach
        )
        explored += tried
        if divergence is None:
            break
        if divergence.deviation is None or not args.keep_going:
            report["explored"] = explored
            return _diverged(args, report, divergence, say)
        deviations[divergence.deviation] = divergence
    reach.phase("random", explored, time.monotonic() - started, reach.ops_run - ops_before)
    report["explored"] = explored
    _say_reach(reach, say)
    if deviations:
        return _deviates(args, report, deviations, say)
    if background:
        say(f"background store: exploring writer schedules for {args.max_time - sequential_time:.0f} s")
        violation, scenarios = verify.explore_background(
            target, args.profile, args.max_time - sequential_time, args.seed, progress
        )
        report["background_explored"] = scenarios
        if violation:
            say(violation)
            report.update(result="diverges", background=violation)
            if args.json:
                print(json.dumps(report, default=_as_json))
            return 1
        say(f"background store: {scenarios} scenarios agree with the background spec")
    report["result"] = "conforms"
    say(f"conforms: {len(usable)} vectors and {explored} explored traces agree with the spec")
    if args.json:
        print(json.dumps(report, default=_as_json))
    return 0


def _write_shortest(divergence: Divergence, path: Path, name: str, label: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    trace = divergence.trace
    shortest = type(trace)(trace.profile, trace.max_bytes, trace.object_nbytes, trace.ops[: divergence.step + 1])
    traces.write(traces.vector_from_trace(shortest, name, f"found by auxspec verify on {label}"), path)


def _diverged(args: argparse.Namespace, report: dict[str, Any], divergence: Divergence, say: Any) -> int:
    say(divergence.render())
    if divergence.deviation:
        say(f"this is vLLM's documented deviation {divergence.deviation}: {DEVIATIONS[divergence.deviation]}")
        say("(--keep-going lists every deviation the target has)")
        report["deviation"] = divergence.deviation
    _write_shortest(divergence, args.out, "divergence", report["target"])
    say(f"written to {args.out}")
    say(teach_cli.pointer(args.out, args.target, args.exec_command))
    report.update(result="diverges", step=divergence.step, expected=divergence.expected, actual=divergence.actual)
    report["trace"] = str(args.out)
    if args.json:
        print(json.dumps(report, default=_as_json))
    return 1


def _deviates(args: argparse.Namespace, report: dict[str, Any], found: dict[str, Divergence], say: Any) -> int:

    say(f"{report['target']} departs from strict only in documented ways (docs/deviations.md):")
    listed = []
    for name in sorted(found):
        path = args.out.with_name(f"{args.out.stem}-{name}{args.out.suffix}")
        _write_shortest(found[name], path, name, report["target"])
        say(f"- {name}: {DEVIATIONS[name]}")
        say("  " + found[name].render().replace("\n", "\n  "))
        say(f"  written to {path}")
        say("  " + teach_cli.pointer(path, args.target, args.exec_command))
        listed.append({"deviation": name, "trace": str(path)})
    report.update(result="deviates", deviations=listed)
    if args.json:
        print(json.dumps(report, default=_as_json))
    return 1


def _reproduce(args: argparse.Namespace) -> int:
    try:
        data = args.file.read_bytes()
        target = load_target(args.target)
    except (LookupError, OSError, ImportError) as error:
        print(f"auxspec: {error}", file=sys.stderr)
        return 2
    trace = decode(data, args.profile, target.features)  # as the harness decoded it
    print(explain(trace))
    divergence = compare(trace, target)
    if divergence is not None:
        print(divergence.render())
        trace = type(trace)(trace.profile, trace.max_bytes, trace.object_nbytes, trace.ops[: divergence.step + 1])
    else:
        print(f"{target.label} agrees with the spec on this input")
    args.out.mkdir(parents=True, exist_ok=True)
    name = args.file.name.replace(".", "_")
    path = args.out / f"{name}.jsonl"
    description = f"reproduced from {args.file.name}" + (f"; diverged on {target.label}" if divergence else "")
    traces.write(traces.vector_from_trace(trace, name, description), path)
    print(f"regression vector written to {path}")
    print(teach_cli.pointer(path, args.target, None))
    return 1 if divergence else 0


def explain(trace: Trace) -> str:
    """Each op with the spec's outcome and the recency order after it."""
    rows = [f"store(max_bytes={trace.max_bytes}, object_nbytes={trace.object_nbytes}, profile={trace.profile})"]
    for number, (op, (outcome, snapshot)) in enumerate(zip(trace.ops, expected_outcomes(trace), strict=True), 1):
        pins = dict(snapshot.references)
        order = " ".join(f"{k}*{pins[k]}" if k in pins else k for k, _ in snapshot.entries)
        rows.append(f"{number:>3}. {describe(op):<60} -> {outcome_to_json(outcome)}")
        rows.append(
            f"      LRU [ {order} ] MRU"
            + (f"  unstored pins {pins}" if set(pins) - {k for k, _ in snapshot.entries} else "")
        )
    return "\n".join(rows)


def _vectors(args: argparse.Namespace) -> int:

    if args.generate:
        written = vectors.generate(args.folder)
        print(f"wrote {len(written)} vectors to {args.folder}")
        return 0
    try:
        loaded = verify.load_vectors([args.folder])
    except TraceError as error:
        print(f"auxspec: {error}", file=sys.stderr)
        return 2
    if not loaded:
        print(f"auxspec: no vectors in {args.folder}", file=sys.stderr)
        return 2
    bad = vectors.stale(loaded)
    for line in bad:
        print(f"stale: {line}")
    cov = vectors.measure(loaded)
    print(
        f"{len(loaded)} vectors, {len(loaded) - len(bad)} match the spec; model coverage {cov.percent:.1f}% "
        f"(lines {cov.lines[0]}/{cov.lines[1]}, branches {cov.branches[0]}/{cov.branches[1]})"
    )
    if cov.missing:
        print("not covered: " + ", ".join(cov.missing))
    return 1 if bad or cov.percent < args.min_coverage else 0


def _command(text: str) -> str:
    """A port command: non-empty, and parsed as a shell would."""
    try:
        parse_command(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text


def _seconds(positive: bool) -> Any:
    def seconds(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
        if not math.isfinite(value) or value < 0 or (positive and value == 0):
            wanted = "positive" if positive else "non-negative"
            raise argparse.ArgumentTypeError(f"{text!r}: give a {wanted} finite number of seconds")
        return value

    return seconds


def _percent(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a percentage") from None
    if not 0 <= value <= 100:  # NaN fails both
        raise argparse.ArgumentTypeError(f"{text!r}: give a percentage from 0 to 100")
    return value


def _version() -> str:
    try:
        return metadata.version("auxstore")
    except metadata.PackageNotFoundError:  # run from a source tree that is not installed
        return "(not installed)"


def _as_json(value: object) -> object:
    if isinstance(value, verify.Reach):
        return value.as_json()
    raise TypeError(f"{type(value).__name__} is not JSON")


def _say_reach(reach: verify.Reach, say: Any) -> None:
    say(
        f"reached: {reach.slots} slots, objects of {reach.object_nbytes} bytes, {reach.keys} keys in a trace "
        f"({reach.keys_over_slots:.1f} per slot), {reach.ops} ops, pin count {reach.pins}, lists of {reach.key_list}"
    )
    for name, figures in reach.phases.items():
        say(
            f"{name}: {figures['traces']:g} traces, {figures['ops']:g} ops in {figures['seconds']:g} s "
            f"({figures['traces_per_s']:g} traces/s, {figures['ops_per_s']:g} ops/s)"
        )
    short = reach.short_of()
    if short:
        say(f"scope NOT reached in this run: {'; '.join(short)}")


def _say(quiet: bool) -> Any:
    def say(text: str) -> None:
        print(text, file=sys.stderr if quiet else sys.stdout, flush=True)

    return say


if __name__ == "__main__":
    sys.exit(main())
