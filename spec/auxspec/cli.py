"""The ``auxspec`` command.

Exit codes: 0 the target conforms (or the vectors check out), 1 a divergence
was found, 2 a usage, file or target error, 3 auxspec itself failed, 4 the
input is not runnable here (the target could not get the memory a valid call
needs: no outcome of the spec's, so not judged).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import re
import sys
import time
import traceback
from collections.abc import Iterator
from dataclasses import replace
from importlib import metadata
from pathlib import Path
from typing import Any

from auxspec import vectors
from auxspec.drivers import gated, remote_command, shrink, verify
from auxspec.drivers import report as report_text
from auxspec.drivers.fuzzing import signature
from auxspec.drivers.protocol import ProtocolError, main_serve, parse_command, process_target
from auxspec.drivers.remote_engines import EngineUnavailable as RemoteEngineUnavailable
from auxspec.engine import traces
from auxspec.engine.codec import decode
from auxspec.engine.compare import Divergence, show
from auxspec.engine.deviations import DEVIATIONS
from auxspec.engine.expect import expected_new, expected_outcomes
from auxspec.engine.ops import Trace
from auxspec.engine.table import describe, trace_needs
from auxspec.engine.target import (
    NotRunnable,
    PortBroken,
    Target,
    bytes_needed,
    errors_of,
    load_attribute,
    load_target,
)
from auxspec.engine.traces import TraceError, printable
from auxspec.generators import exhaustive, large
from auxspec.generators.background import scenario_vector, vector_scenario
from auxspec.models.sequential import Err
from auxspec.teach import cli as teach_cli
from auxspec.teach.cli import op_timeout
from auxspec.teach.timeline import ROW_ENDS, some

BUNDLED_VECTORS = Path(__file__).with_name("vectors")
DEFAULT_TIME = 30.0  # --max-time without --max-traces
REMOTE_DEFAULT_TIME = 60.0  # the same under --profile remote: each call is a round trip to the server, and more
COUNT_CAP = 3600.0  # --max-time's default under --max-traces: a guard, not the budget
LABEL = 120  # the most of a target's label the first line shows (cut in its middle)
BACKGROUND_SHARE = 20  # --max-traces N gives the background search N / this scenarios (each runs a thread)
REGRESSIONS = BUNDLED_VECTORS / "regressions"
NOT_RUNNABLE = 4  # exit status: the target had not the memory a valid input needs (not judged)


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
    check.add_argument("--op-timeout", type=op_timeout, default=5.0, help="seconds a port process may take per op")
    check.add_argument(
        "--profile",
        choices=("strict", "upstream", "remote"),
        default="strict",
        help="remote: a store whose objects an engine holds, a Redis server (AUXSTORE_REDIS_URL) or a Mooncake "
        "master (AUXSTORE_MOONCAKE_MASTER; docs/remote.md); its search only (no vectors, small scope, depth, "
        f"large stores or background phase), for --max-time (default {REMOTE_DEFAULT_TIME:g}) or --max-traces",
    )
    check.add_argument(
        "--engine",
        choices=("redis", "mooncake"),
        help="under --profile remote: the engine to verify against (default: the one whose variable is set)",
    )
    check.add_argument(
        "--max-time",
        type=_seconds(positive=False),
        help=f"seconds of search (default {DEFAULT_TIME:g}; with --max-traces a cap, default {COUNT_CAP:g}); the "
        "vectors and the small scope, fixed sets of traces, run to their end before it "
        "(--max-time 0: the vectors only)",
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
        "--error",
        dest="errors",
        action="append",
        default=[],
        metavar="CLASS=KIND",
        help="a port's own exception class (module:Class) and the error kind it stands for "
        "(capacity, missing, unreferenced, closed, payload, type, buffer, config); repeatable",
    )
    check.add_argument(
        "--large-stores",
        choices=("auto", "on", "off"),
        default="auto",
        help="after the search, run traces over a large store (--large-bytes; on top of --max-time). auto: when "
        "--max-time is at least 10 and TARGET runs in this process (a port process under --exec only with on)",
    )
    check.add_argument(
        "--large-bytes",
        type=_large_bytes,
        default=large.DEFAULT_BYTES,
        metavar="BYTES",
        help=f"the large store's size (default {large.DEFAULT_BYTES / 1e6:.0f} MB: offsets cross 2^27 and 2^28, "
        "under 1 GB of memory in all); 2.2e9 crosses 2^30 and 2^31 and needs about 4.5 GB: the spec holds every "
        "payload the target stores",
    )
    check.add_argument(
        "--max-traces",
        type=_count,
        metavar="N",
        help="a count budget: the random search stops after N traces and the background search after "
        f"N/{BACKGROUND_SHARE} scenarios, the same ones on any machine (--max-time is then only a cap, "
        f"default {COUNT_CAP:g} s); the small scope always runs to completion",
    )
    check.add_argument("--verbose", action="store_true", help="print whole traces, payloads and long lines")
    check.add_argument(
        "--depth",
        choices=("auto", "on", "off"),
        default="auto",
        help="after the small scope, run a few long store lives (over 70,000 puts, reads, misses, keys and "
        "evictions, stores of over 70,000 slots, lists of up to 5,120 keys, a pin count past 70,000), within "
        f"{verify.DEPTH_SHARE * 100:.0f}%% of --max-time and half of what the random search has left. auto: when "
        f"--max-time is at least {verify.DEPTH_MIN_TIME:g}",
    )
    check.add_argument(
        "--exact-order",
        action="store_true",
        help="also compare the recency order of keys with a reference (no call can observe it under strict; "
        "under upstream it is always compared)",
    )

    again = commands.add_parser(
        "reproduce",
        help="replay a fuzzer finding (or a trace) on a target, and save it as a regression vector if asked",
        description="Replay FILE on TARGET: a trace or vector file (.jsonl) as the trace it holds, a raw fuzzer "
        "input (crash-*, timeout-*, a corpus file: no extension) decoded with the op alphabet as the harness "
        "did. Shows each op with the spec's outcome and state, and where TARGET diverges. Exit 1 when it "
        "diverges, 0 when it agrees, 2 for a file or target error.",
    )
    again.add_argument("file", type=Path, help="a .jsonl trace or vector, or a raw fuzzer input")
    again.add_argument("--target", help="as for verify (default: the bundled store)")
    again.add_argument(
        "--exec", dest="exec_command", metavar="CMD", help="a port process speaking docs/protocol.md instead"
    )
    again.add_argument("--op-timeout", type=op_timeout, default=5.0, help="seconds a port process may take per op")
    again.add_argument("--profile", choices=("strict", "upstream"), default="strict", help="how a raw input is decoded")
    again.add_argument("--raw", action="store_true", help="decode FILE as fuzzer bytes whatever its name")
    again.add_argument(
        "--save",
        type=Path,
        metavar="DIR",
        help="write the trace, cut after the diverging step, as a regression vector into DIR "
        f"(only when TARGET still diverges; the bundled store's regressions are {REGRESSIONS})",
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
    if args.max_time is None:
        args.max_time = COUNT_CAP if args.max_traces is not None else DEFAULT_TIME
        if args.profile == "remote" and args.max_traces is None:
            args.max_time = REMOTE_DEFAULT_TIME
    if args.profile == "remote":
        return _verify_remote(args)
    report: dict[str, Any] = {"profile": args.profile}
    stop_port: Any = None
    try:
        if args.exec_command is not None and args.target:
            raise LookupError("give a TARGET or --exec CMD, not both")
        vector_paths = args.vectors or ([BUNDLED_VECTORS] if BUNDLED_VECTORS.is_dir() else [])
        for folder in args.vectors or ():  # a folder given by mistake would otherwise verify nothing and pass
            if folder.is_dir() and next(folder.rglob("*.jsonl"), None) is None:
                raise LookupError(f"{folder}: no vector file (*.jsonl) in this folder")
        vectors = [v for v in verify.survey_vectors(vector_paths) if v.profile == args.profile]
        if args.exec_command is not None:  # started last: nothing after it can fail and leave it running
            port = process_target(args.exec_command, args.op_timeout)
            target, stop_port = port.target, port.close
            # What the handshake leaves out, said before anything runs.
            skipped = port.handshake.skipped()
            left_out = sum(1 for v in vectors if not v.needs <= target.features)
            if left_out:
                skipped.append(f"{left_out} of {len(vectors)} vectors need what the port does not offer")
            report["protocol"] = port.handshake.protocol
            report["capabilities"] = sorted(port.handshake.capabilities)
            report["skipped"] = skipped
            for line in skipped:
                _say(args.json, args.verbose)(f"port: {line}")
        else:
            target = load_target(args.target)
        if args.exact_order:
            target = replace(target, exact_order=True)
        if args.errors:
            target = replace(target, errors=_errors(args.errors))
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
    except TraceError as error:  # a vector file that changed after it was checked, read again to replay it
        print(f"auxspec: {error}", file=sys.stderr)
        return 2
    except NotRunnable as error:
        return _not_runnable(error, "verify: the large-store phase uses --large-bytes; a vector has its own sizes")
    except Exception as error:  # verify's own failure, never the port's divergence
        return _internal_error("verify", error)
    finally:
        if stop_port:
            stop_port()


def _not_runnable(error: NotRunnable, hint: str = "") -> int:
    """A valid input the target had not the memory for: said with the bytes
    its store needs, with its own exit status, never as a divergence."""
    needs = bytes_needed(error.trace) if error.trace is not None else 0
    sizes = ""
    if error.trace is not None:
        sizes = f" (max_bytes={error.trace.max_bytes}, object_nbytes={error.trace.object_nbytes}"
        sizes += f": its store holds up to {needs:,} bytes at once)" if needs else ")"
    print(f"auxspec: not runnable here{sizes}: {printable(str(error))[:300]}", file=sys.stderr)
    if hint:
        print(f"auxspec: {hint}", file=sys.stderr)
    return NOT_RUNNABLE


def _verify_remote(args: argparse.Namespace) -> int:
    """verify --profile remote (drivers.remote_command): the engine first, so
    that no engine named or none answering is one line and exit 2 before anything runs."""
    say = _say(args.json, args.verbose)
    stop: Any = None
    client: Any = None  # the engine (remote_engines.Engine)
    try:
        if args.exec_command is not None and args.target:
            raise LookupError("give a TARGET or --exec CMD, not both")
        client = remote_command.connect_engine(args.engine)
        options = remote_command.Options(
            args.target,
            args.exec_command,
            args.op_timeout,
            args.max_time,
            args.max_traces,
            args.seed,
            args.out,
            args.verbose,
            args.engine,
        )
        target, stop = remote_command.load_target_of(args.target, args.exec_command, args.op_timeout)
        if args.errors:
            target = replace(target, errors=_errors(args.errors))
    except (LookupError, OSError, ImportError, ProtocolError) as error:
        print(f"auxspec: {error}", file=sys.stderr)
        if client is not None:
            client.close()
        return 2
    try:
        code, report = remote_command.verify(options, target, client, say)
    except RemoteEngineUnavailable as error:  # the engine went away during the run
        print(f"auxspec: {error}", file=sys.stderr)
        return 2
    except Exception as error:  # verify's own failure (or the server's), never the store's divergence
        return _internal_error("verify", error)
    finally:
        if stop is not None:
            stop()
        client.close()
    if args.json:
        print(json.dumps(report))
    return code


def _internal_error(command: str, error: BaseException) -> int:
    """Report a failure of auxspec itself: its own exit status, the
    traceback, and a request to report it (the target is not judged)."""
    print(
        f"auxspec: INTERNAL ERROR: {command} itself failed ({type(error).__name__}: {error}); this is a bug "
        "in auxspec, not a divergence of the target. Please report it with the command and the traceback below.",
        file=sys.stderr,
    )
    traceback.print_exception(error, file=sys.stderr)
    return report_text.INTERNAL_ERROR


def _check(args: argparse.Namespace, target: Target, vectors: list[traces.VectorFile], report: dict[str, Any]) -> int:
    with _Progress(enabled=not args.json and sys.stdout.isatty()) as bar, verify.hypothesis_scratch():
        return _phases(args, target, vectors, report, bar)


def _phases(
    args: argparse.Namespace, target: Target, vectors: list[traces.VectorFile], report: dict[str, Any], bar: _Progress
) -> int:
    say = _say(args.json, args.verbose)
    report["target"] = target.label
    budgets: dict[str, str] = {}
    report["budgets"] = budgets  # which budget ended each phase: complete, count, time, found
    say(f"verifying {report_text.middle(target.label, LABEL)} against the {args.profile} spec")

    # A divergence that is a documented deviation of vLLM from strict is
    # recorded and the search goes on for others; any other divergence ends
    # it, except in a vector under --keep-going: every failing vector is
    # reported, then the search runs, then a summary.
    deviations: dict[str, Divergence] = {}
    failing: list[tuple[traces.VectorFile, Divergence]] = []
    report["failing_vectors"] = failing
    started = time.monotonic()
    # Vectors that use what the target lacks (read_into, observations, Python forms) are left out.
    usable = [v for v in vectors if v.needs <= target.features]
    bar.start("vectors", len(usable))
    for number, vector in enumerate(usable, start=1):
        divergence = verify.replay_file(vector, target)
        bar.update(number)
        if divergence:
            if not args.keep_going:
                budgets["vectors"] = "found"
                phase = f"vector {printable(vector.name)}"
                return _diverged(args, report, divergence, say, phase, target, name=printable(vector.name))
            say(f"vector {printable(vector.name)} ({number}/{len(usable)}) diverges")
            divergence = verify.shrink_divergence(divergence, target, fresh=_fresh_port(args)).failure
            if divergence.deviation is None:
                failing.append((vector, divergence))
                say("  " + _render(args, divergence).replace("\n", "\n  "))
            else:
                deviations.setdefault(divergence.deviation, divergence)
    budgets["vectors"] = "complete"
    report["vectors"] = len(usable)
    say(f"{len(usable)} vectors replayed ({time.monotonic() - started:.1f} s)" + _failing_count(failing, usable))

    def progress(tried: int, left: float) -> None:
        bar.left(left)  # a log gets one line per phase, not one per round

    # A target with a background store gives a third of the time (or of the
    # count) to its interleavings; the rest goes to the sequential store:
    # first every trace of the small scope (a fixed count: it always
    # completes, whatever the machine), then the search.
    background = target.background is not None and target.observe is not None
    reach = verify.Reach()
    report["scope"] = reach
    if args.max_time == 0 and args.max_traces is None:
        # --max-time 0 asks for no search: the vectors only (a folder of
        # exercise vectors, a regression file). The small scope runs whole or
        # not at all, never cut by the clock.
        budgets["exhaustive"] = "skipped"
        say("small scope: skipped (--max-time 0: the vectors only)")
    else:
        started, ops_before = time.monotonic(), reach.ops_run
        bar.start("small scope", None)
        while True:
            divergence, small = verify.exhaust(target, args.profile, None, frozenset(deviations), reach)
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
            + ("complete" if small.complete else "stopped at a divergence")
        )
        if divergence is not None and (divergence.deviation is None or not args.keep_going):
            budgets["exhaustive"] = "found"
            report["explored"] = small.traces
            return _diverged(args, report, divergence, say, "the small scope", target, frozenset(deviations))
        budgets["exhaustive"] = "complete"
    # --max-time is the searches' (the small scope is a fixed count of
    # traces, not charged to it, so a loaded machine does not take search
    # time away): two thirds to the sequential search, the background third
    # in two halves, one before the sequential search and one after it, so a
    # writer bug is not found only in the last third of the run. A run that
    # has recorded documented deviations ends with them before the background store.
    sequential_time = args.max_time * (2 / 3 if background else 1)
    background_time = (args.max_time - sequential_time) / 2
    background_count = None if args.max_traces is None else max(args.max_traces // BACKGROUND_SHARE // 2, 1)
    deadline = time.monotonic() + sequential_time
    early = background and not deviations
    if early and (
        code := explore_background(args, target, report, reach, bar, progress, background_time, say, background_count)
    ):
        return code
    deadline += background_time
    if code := _depth(args, target, report, reach, frozenset(deviations), say, deadline - time.monotonic()):
        return code
    # The depth phase's background life is the background store's time: it
    # comes out of the background search's second half, not the random search's.
    charged = min(float(report.get("depth", {}).get("background_seconds", 0.0)), background_time)
    deadline += charged
    background_time -= charged
    explored = 0
    bar.start("random search", None, max(deadline - time.monotonic(), 0.0))
    budgets["random"] = "time"
    while (left := deadline - time.monotonic()) > 0:
        still = None if args.max_traces is None else args.max_traces - explored
        if still is not None and still <= 0:
            break
        divergence, tried = verify.explore(
            target,
            args.profile,
            left,
            args.seed,
            progress,
            known=frozenset(deviations),
            reach=reach,
            max_traces=still,
        )
        explored += tried
        if divergence is None:
            break
        if divergence.deviation is None or not args.keep_going:
            budgets["random"] = "found"
            report["explored"] = explored
            return _diverged(args, report, divergence, say, "the random search", target, frozenset(deviations))
        deviations[divergence.deviation] = divergence
    if args.max_traces is not None and explored >= args.max_traces:
        budgets["random"] = "count"
    report["explored"] = explored
    if code := _large_stores(args, target, report, reach, frozenset(deviations), say):
        return code
    _say_reach(reach, say)
    say(reach.domain.line(args.profile, target.features))
    if deviations:
        return _deviates(args, report, deviations, say, target)
    if background and (
        code := explore_background(args, target, report, reach, bar, progress, background_time, say, background_count)
    ):
        return code
    if failing:
        report["result"] = "diverges"
        return _finish(args, report, 1, say)
    report["result"] = "conforms"
    ended = ", ".join(f"{phase} by {how}" for phase, how in budgets.items() if phase in ("random", "background"))
    scope = "the whole small scope" if budgets["exhaustive"] == "complete" else "no small scope (--max-time 0)"
    say(
        f"conforms: {len(usable)} vectors, {scope} and {explored} explored traces agree with "
        f"the spec (searches ended: {ended})"
    )
    return _finish(args, report, 0, say)


def explore_background(
    args: argparse.Namespace,
    target: Any,
    report: dict[str, Any],
    reach: Any,
    bar: Any,
    progress: Any,
    seconds: float,
    say: Any,
    count: int | None = None,
) -> int | None:
    """One part of the background store's time (or of its count): the exit
    code when a violation is found, else None (the scenarios tried add up in
    the report)."""
    done = report.get("background_explored", 0)
    budgets = report.setdefault("budgets", {})
    if "background_exit" not in report and args.exec_command is None:
        # Once per run, first: its time (an interpreter's start-up) is the phase's.
        checked = verify.check_background_exit(args.target)
        report["background_exit"] = checked.as_json()
        reach.phase("background", 0, checked.seconds, 0)
        seconds = max(seconds - checked.seconds, 0.0)
        if checked.error is not None:
            print(f"auxspec: the background store's exit check did not run: {checked.error}", file=sys.stderr)
            return 2
        if checked.violation is not None:
            say(f"DIVERGES (found by the background exit check): {checked.violation}")
            # No trace to write: the check is a program's exit. Running verify with no search time runs it again.
            again = ["verify", *([args.target] if args.target else []), "--profile", args.profile]
            again += ["--max-time", "0", "--large-stores", "off"]
            for line in report_text.wrapped("reproduce:", report_text.command(again)):
                say(line)
            report.update(result="diverges", background={"violation": checked.violation}, found_by="the exit check")
            return _finish(args, report, 1, say)
        say(f"background store: a program that leaves one open exits ({checked.seconds:.1f} s)")
    if count is None:
        say(f"background store: exploring writer schedules for {seconds:.0f} s")
    else:
        say(f"background store: exploring {count} writer schedules (at most {seconds:.0f} s)")
        seconds = args.max_time  # the count decides; the time is a cap
    bar.start("background", None, seconds)
    seed = None if args.seed is None else args.seed + done  # the second part draws other scenarios
    found, scenarios = verify.explore_background(
        target, args.profile, seconds, seed, progress, reach=reach, max_scenarios=count
    )
    report["background_explored"] = done + scenarios
    budgets["background"] = "found" if found else ("count" if count is not None and scenarios >= count else "time")
    if found is not None:
        return _diverged_background(args, report, found, target, say)
    say(f"background store: {done + scenarios} scenarios agree with the background spec")
    return None


def _large_stores(
    args: argparse.Namespace, target: Target, report: dict[str, Any], reach: Any, known: frozenset[str], say: Any
) -> int | None:
    """The large-store phase, or why it is skipped (recorded in the report
    either way): the exit code when the target diverges, else None."""
    skipped = None
    if args.large_stores == "off":
        skipped = "turned off (--large-stores off)"
    elif args.large_stores == "auto" and args.exec_command is not None:
        skipped = "a port process (--exec) gets it only with --large-stores on (2.2 GB through the protocol)"
    elif args.large_stores == "auto" and args.max_time < verify.LARGE_MIN_TIME:
        skipped = f"--max-time is below {verify.LARGE_MIN_TIME:g} s (--large-stores on runs it anyway)"
    if skipped is not None:
        report["large_stores"] = {"ran": False, "skipped": skipped}
        say(f"large stores: skipped, {skipped}")
        return None
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    where = large.Geometry.of(args.large_bytes)
    say(f"large stores: a store of {where.describe()} (seed {seed})")
    run = verify.explore_large(target, args.profile, seed, known, reach, where=where)
    record: dict[str, Any] = {"ran": True, "bytes": where.max_bytes, "seed": seed, "traces": run.traces, "ops": run.ops}
    record["seconds"] = round(run.seconds, 1)
    report["large_stores"] = record
    if run.divergence is None:
        say(f"large stores: {run.traces} traces, {run.ops} ops agree with the spec ({run.seconds:.1f} s)")
        return None
    divergence = run.divergence
    again = ["verify"]
    again += ["--exec", args.exec_command] if args.exec_command else [args.target] if args.target else []
    again += ["--profile", args.profile, "--large-stores", "on", "--large-bytes", str(where.max_bytes)]
    again += ["--max-time", "0", "--seed", str(seed)]
    # The seed rebuilds the whole trace; the shrunk vector (compact payloads,
    # docs/protocol.md) is what the report and --out hold.
    record.update(trace=run.trace, reproduce=" ".join(report_text.command(again)), divergence=divergence.summary_json())
    if divergence.deviation:
        record["deviation"] = divergence.deviation
    phase = f"the large-store phase, trace {run.trace}"
    return _diverged(
        args, report, divergence, say, phase, target, known, "large-store", verify.LARGE_TRIES, verify.LARGE_SECONDS
    )


def _depth(
    args: argparse.Namespace,
    target: Target,
    report: dict[str, Any],
    reach: Any,
    known: frozenset[str],
    say: Any,
    search_left: float,
) -> int | None:
    """The depth phase, or why it is skipped: the exit code when the target
    diverges, else None. Its time comes out of the random search's
    (``search_left`` seconds): at most half of --max-time, and at most half
    of what the search has left, so the search keeps the other half."""
    if args.depth == "off" or (args.depth == "auto" and args.max_time < verify.DEPTH_MIN_TIME):
        why = "turned off (--depth off)" if args.depth == "off" else f"--max-time is below {verify.DEPTH_MIN_TIME:g} s"
        report["depth"] = {"ran": False, "skipped": why}
        if args.depth == "off":  # a short run's automatic skip stays in the JSON report: its log fits a screen
            say(f"depth: skipped, {why}")
        return None
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    budget = max(min(args.max_time * verify.DEPTH_SHARE, search_left / 2), 1.0)
    run = verify.explore_depth(target, args.profile, seed, budget, known, reach)
    record: dict[str, Any] = {"ran": True, "seed": seed, "lives": run.lives, "ops": run.ops, "complete": run.complete}
    record.update(seconds=round(run.seconds, 1), reached=run.depth.as_json())
    record.update(background_seconds=round(run.background_seconds, 1))
    report["depth"] = record
    reached = f"depth reached: {run.depth.line()}"
    if run.violation is not None and run.scenario is not None:  # the background life's
        say(f"depth: the {run.life} violates the background spec (seed {seed})")
        record.update(life=run.life)
        return _diverged_background(args, report, verify.BackgroundFound(run.scenario, run.violation), target, say)
    if run.background_seconds:
        say(
            f"depth: the background life agrees with the background spec ({run.depth.queued:,} batches queued "
            f"behind the held writer between two reads, {run.background_seconds:.1f} s of the background store's time)"
        )
    if run.divergence is None:
        ending = "" if run.complete else f", cut short at {budget:.0f} s (the port's speed)"
        lives = run.seconds - run.background_seconds
        say(f"depth: {run.lives} long lives, {run.ops:,} ops agree with the spec ({lives:.1f} s{ending})")
        say(reached)
        return None
    divergence = run.divergence
    say(
        f"depth: {run.life} diverges at op {run.found_at:,} (seed {seed}); shrunk in {run.shrink_seconds:.1f} s "
        f"to {divergence.step + 1} calls"  # the vector: up to the call that differs
    )
    say(reached)
    record.update(life=run.life, found_at=run.found_at, calls=divergence.step + 1)
    # Every depth catch goes through the one report: a deep one (a counter
    # that needs tens of thousands of calls) is judged, shrunk and written on
    # the in-place spec (verify.is_deep), so its vector costs seconds.
    return _diverged(args, report, divergence, say, "the depth phase", target, known)


def _failing_count(failing: list[tuple[traces.VectorFile, Divergence]], usable: list[traces.VectorFile]) -> str:
    return f", {len(failing)} of {len(usable)} fail" if failing else ""


def _finish(args: argparse.Namespace, report: dict[str, Any], code: int, say: Any) -> int:
    """The summary of every failing vector (under --keep-going), then the JSON report."""
    failing: list[tuple[traces.VectorFile, Divergence]] = report.get("failing_vectors", [])
    if failing:
        say(f"summary: {len(failing)} of {report.get('vectors', '?')} vectors fail:")
        for vector, divergence in failing:
            where = "building the store" if divergence.step < 0 else f"step {divergence.step + 1}"
            differs = ", ".join(divergence.as_json()["differs"])
            say(f"  {vector.name}: {where} ({differs} differs)")
        code = 1
        if report.get("result") == "deviates":
            report["result"] = "diverges"  # a failing vector that is no documented deviation
    report["failing_vectors"] = [
        {"name": vector.name, "divergence": divergence.as_json()} for vector, divergence in failing
    ]
    if args.json:
        print(json.dumps(report, default=_as_json))
    return code


def _write_shortest(divergence: Divergence, path: Path, name: str, label: str) -> int:
    """The trace up to the divergence written to ``path`` as a vector; its
    entries (op lines: a call repeated in a row is one, with ``times``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    trace = divergence.trace
    shortest = type(trace)(trace.profile, trace.max_bytes, trace.object_nbytes, trace.ops[: divergence.step + 1])
    description = f"found by auxspec verify on {label}"
    outcomes = verify.expected_outcomes_of(shortest)  # a deep trace's on the in-place spec: seconds, not minutes
    vector = traces.Vector(name, description, shortest, outcomes, expected_new(shortest))
    traces.write(vector, path)
    return traces.entry_count(vector)


@contextlib.contextmanager
def _environment(variables: dict[str, str]) -> Iterator[None]:
    """``variables`` set in this process's environment for the block (the
    readers' limits, as the printed commands set them)."""
    before = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _limits(path: Path) -> dict[str, str]:
    """The variables that let reproduce and explain read the file at ``path``
    when it is past their default limits (a deep vector of 100,000 calls, a
    large store's): its op count, its size rounded up, its longest line and
    the bytes its compact payloads make."""
    try:
        size = path.stat().st_size
        lines = longest = calls = 0
        with path.open("rb") as stream:
            for line in stream:
                lines, longest = lines + 1, max(longest, len(line))
                repeated = _TIMES.search(line)
                calls += int(repeated.group(1)) if repeated else 1
    except OSError:
        return {}
    limits: dict[str, str] = {}
    if lines - 1 > traces.MAX_HELD_OPS:
        limits[traces.OPS_VARIABLE] = str(lines)
    if size > traces.MAX_FILE:
        limits[traces.FILE_VARIABLE] = str(size + (1 << 20))
    if longest > traces.MAX_LINE:  # a large store's fill joined into one put: its payloads' parts
        limits[traces.LINE_VARIABLE] = str(longest)
    if (expanded := traces.expanded_size(path)) > traces.MAX_EXPANDED:
        limits[traces.EXPANDED_VARIABLE] = str(expanded)
    if calls > traces.MAX_EXPANDED_OPS:
        limits[traces.EXPANDED_OPS_VARIABLE] = str(calls)
    return limits


_TIMES = re.compile(rb'"times": (\d+)\}$')  # how a written line ends when it is repeated (traces.dumps)


def _render(args: argparse.Namespace, divergence: Divergence) -> str:
    """The trace up to the divergence and both sides: the last ops only, unless --verbose."""
    return divergence.render(last=None if args.verbose else report_text.SHOWN_OPS)


def _diverged(
    args: argparse.Namespace,
    report: dict[str, Any],
    divergence: Divergence,
    say: Any,
    phase: str,
    target: Target,
    known: frozenset[str] = frozenset(),
    name: str = "divergence",
    tries: int = shrink.TRIES,
    seconds: float = shrink.SECONDS,
) -> int:
    """The one report of a sequential counterexample, whatever phase found
    it: shrunk (within ``tries`` candidates and ``seconds``), headed by the
    op that differs, written to --out as a vector, with the explain and
    reproduce commands."""
    before = divergence.length
    fresh = _fresh_port(args)
    shrunk = verify.shrink_divergence(divergence, target, known, tries, seconds, fresh=fresh)
    divergence = shrunk.failure
    report["shrink"] = {
        "from_ops": before,
        "to_ops": len(divergence.trace.ops),
        "tries": shrunk.tries,
        "ended_by": shrunk.ended_by,
    }
    report["found_by"] = phase
    lines = [report_text.headline(divergence, phase)]
    lines += _render(args, divergence).split("\n")
    calls = len(divergence.trace.ops)
    shrunk_line = len(lines)
    lines.append(f"shrunk from {before} to {calls} ops ({shrunk.tries} tries, {shrunk.ended_by})")
    if divergence.deviation:
        lines.append(f"this is vLLM's documented deviation {divergence.deviation}: {DEVIATIONS[divergence.deviation]}")
        lines.append("(--keep-going lists every deviation the target has)")
        report["deviation"] = divergence.deviation
    entries = _write_shortest(divergence, args.out, name, report["target"])
    report["shrink"]["to_entries"] = entries
    if entries < calls:  # a call made many times in a row is one entry of the vector ("times")
        lines[shrunk_line] = (
            f"shrunk from {before} to {calls} ops in {entries} entries ({shrunk.tries} tries, {shrunk.ended_by})"
        )
    lines.append(f"written to {args.out}")
    if not _replays(args.out, target, fresh if divergence.actual.startswith(verify.BROKE) else None):
        lines.append(
            "note: the written vector does not diverge when replayed (a trace file holds str and int subclass "
            "values as plain ones, and a port may not repeat itself): the trace above is the one that diverged"
        )
        report["replays"] = False
    lines += _commands(args, args.out)
    _say_block(args, say, lines)
    report.update(result="diverges", step=divergence.step + 1, divergence=divergence.as_json())
    report["trace"] = str(args.out)
    return _finish(args, report, 1, say)


def _replays(path: Path, target: Target, fresh: Any = None) -> bool:
    """Whether the vector just written diverges again on ``target``, as
    reproduce will replay it (in a port process of its own, given ``fresh``:
    one that broke on it may have broken for its history; a deep one on the
    in-place spec)."""
    try:
        with _environment(_limits(path)):
            trace = traces.load(path).trace
        if fresh is not None:
            return verify.broken_in_fresh_process(fresh)(trace) is not None
        return _compare(trace, target) is not None
    except (TraceError, PortBroken):
        return False


def _fresh_port(args: argparse.Namespace) -> Any:
    """A new port process as verify's (its options applied), and how to stop
    it: what a crashed, hung or garbled port's trace is shrunk on; None
    without --exec."""
    if args.exec_command is None:
        return None

    def fresh() -> tuple[Target, Any]:
        target, stop = verify.exec_target(args.exec_command, args.op_timeout)
        if args.exact_order:
            target = replace(target, exact_order=True)
        if args.errors:
            target = replace(target, errors=_errors(args.errors))
        return target, stop

    return fresh


def _commands(args: argparse.Namespace, path: Path) -> list[str]:
    """The explain and reproduce commands for the vector at ``path``, as a
    fresh shell runs them (with the variables that raise the readers' limits
    for a file past them)."""
    given = report_text.target_words(args.target, args.exec_command)
    limits = _limits(path)
    words = ["explain", str(path), *(given or ["--target"])]
    lines = report_text.wrapped("explain:  ", report_text.command(words, limits))
    lines += report_text.wrapped("reproduce:", report_text.command(["reproduce", str(path), *given], limits))
    return lines


def _compare(trace: Trace, target: Target) -> Divergence | None:
    """The one compare (``verify.judge``): a deep trace on the in-place
    spec, a large store's without a snapshot per op."""
    return verify.judge(trace, target)


def _say_block(args: argparse.Namespace, say: Any, lines: list[str]) -> None:
    """A failing report's block: at most LINES lines less the phase lines before it, unless --verbose."""
    for line in lines if args.verbose else report_text.fit(lines, report_text.LINES - 10):
        say(line)


def _diverged_background(
    args: argparse.Namespace, report: dict[str, Any], found: verify.BackgroundFound, target: Target, say: Any
) -> int:
    """The one report of a background counterexample: shrunk call by call
    with its writer schedule, written to --out as a background vector
    (schedule included, so the replay holds the writer where this run did),
    with the reproduce command."""
    before = shrink.owner_calls(found.scenario)
    shrunk = verify.shrink_background(found, target)
    scenario, violation = shrunk.value, shrunk.failure
    calls = shrink.owner_calls(scenario)
    entries = shrink.owner_entries(scenario.ops)  # its vector's owner-call lines (a repeated call is one)
    report["shrink"] = {
        "from_ops": before,
        "to_ops": calls,
        "to_entries": entries,
        "tries": shrunk.tries,
        "ended_by": shrunk.ended_by,
    }
    report["found_by"] = "the background phase"
    lines = [report_text.background_headline(violation, calls)]
    lines += violation.split("\n")[1:]  # its first line is the headline's
    in_entries = f" in {entries} entries" if entries < calls else ""
    lines.append(f"shrunk from {before} to {calls} owner calls{in_entries} ({shrunk.tries} tries, {shrunk.ended_by})")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    vector = scenario_vector(scenario, "background-divergence", f"found by auxspec verify on {report['target']}")
    args.out.write_text(traces.dumps_background(vector), encoding="utf-8")
    lines.append(f"written to {args.out} (a background vector: the owner calls and the writer's schedule)")
    lines += _commands(args, args.out)
    _say_block(args, say, lines)
    report.update(result="diverges", background={"violation": violation}, trace=str(args.out))
    return _finish(args, report, 1, say)


def _deviates(
    args: argparse.Namespace, report: dict[str, Any], found: dict[str, Divergence], say: Any, target: Target
) -> int:
    say(f"{report['target']} departs from strict only in documented ways (docs/deviations.md):")
    listed = []
    for name in sorted(found):
        found[name] = verify.shrink_divergence(found[name], target).failure  # the same deviation, fewer ops
        path = args.out.with_name(f"{args.out.stem}-{name}{args.out.suffix}")
        _write_shortest(found[name], path, name, report["target"])
        say(f"- {name}: {DEVIATIONS[name]}")
        say("  " + _render(args, found[name]).replace("\n", "\n  "))
        say(f"  written to {path}")
        for line in _commands(args, path):
            say("  " + line)
        listed.append({"deviation": name, "trace": str(path), "divergence": found[name].as_json()})
    report.update(result="deviates", deviations=listed)
    return _finish(args, report, 1, say)


def _reproduce(args: argparse.Namespace) -> int:
    try:
        return _reproduce_file(args)
    except NotRunnable as error:
        return _not_runnable(error)
    except Exception as error:  # reproduce's own failure, never the target's divergence
        return _internal_error("reproduce", error)


def _reproduce_background(args: argparse.Namespace) -> int:
    """Replay a background vector: the owner calls with the writer held and
    let go as recorded, judged against the background spec."""
    try:
        scenario = vector_scenario(traces.load_background(args.file))
        if args.exec_command:
            raise LookupError("a background vector needs a Python target (--target): a port process has no writer")
        target = load_target(args.target)
        if target.background is None or target.observe is None:
            raise LookupError(f"{target.label} has no background store (or no snapshot()) to replay this on")
    except (LookupError, OSError, ImportError, TraceError, ValueError) as error:
        print(f"auxspec: {error}", file=sys.stderr)
        return 2
    print(f"replaying the background vector {args.file.name} on {target.label} (profile {scenario.profile})")
    try:
        gated.run_scenario(target, scenario)
    except gated.Violation as violation:
        print(str(violation))
        print("the background store did what the background spec does not allow")
        return 1
    print(f"{target.label} agrees with the background spec on this scenario")
    return 0


def _reproduce_remote(args: argparse.Namespace) -> int:
    """Replay a remote counterexample (verify --profile remote wrote it) with its deletions."""
    try:
        if args.exec_command and args.target:
            raise LookupError("give --target or --exec CMD, not both")
        code, lines = remote_command.replay_on(args.file, args.target, args.exec_command, args.op_timeout)
    except (LookupError, OSError, ImportError, TraceError, ProtocolError) as error:
        print(f"auxspec: {error}", file=sys.stderr)
        return 2
    for line in lines:
        print(report_text.clip(line))
    return code


def _reproduce_file(args: argparse.Namespace) -> int:
    path: Path = args.file
    header = None if args.raw else traces.header_format(path)  # read once: it names the kind of file
    if header == traces.BACKGROUND_FORMAT:
        return _reproduce_background(args)
    if header == remote_command.FORMAT:
        return _reproduce_remote(args)
    # A trace or vector: named .jsonl, or with a header line whatever its name (verify --out NAME).
    held = not args.raw and (path.suffix == ".jsonl" or header is not None)
    if not held and path.suffix and not args.raw:
        print(
            f"auxspec: {path} is neither a trace or vector file (named .jsonl, or whose first line is a header "
            'with "format") nor a raw fuzzer input (crash-*, timeout-*, a corpus file: names without an '
            "extension); give --raw to decode it as fuzzer bytes",
            file=sys.stderr,
        )
        return 2
    stop = None
    try:
        if args.exec_command and args.target:
            raise LookupError("give --target or --exec CMD, not both")
        if held:
            trace = traces.load(path, held=True).trace
            how = f"the trace in {path.name} (profile {trace.profile})"
        else:
            data = traces.read_bytes(path)
            how = f"{len(data)} bytes of {path.name} decoded as a fuzzer input (profile {args.profile})"
        if args.exec_command:
            target, stop = verify.exec_target(args.exec_command, args.op_timeout)
        else:
            target = load_target(args.target)
        if not held:
            trace = decode(data, args.profile, target.features)  # as the harness decoded it
        missing = trace_needs(trace) - target.features
        if missing:
            raise LookupError(f"{target.label} cannot run this trace: it has no {', '.join(sorted(missing))}")
        return _replay(args, trace, target, how)
    except (LookupError, OSError, ImportError, TraceError, ProtocolError) as error:
        print(f"auxspec: {error}", file=sys.stderr)
        return 2
    finally:
        if stop is not None:
            stop()


def _replay(args: argparse.Namespace, trace: Trace, target: Target, how: str) -> int:
    print(f"replaying {how} on {target.label}")
    if verify.is_deep(trace):  # a deep trace: its calls by their ends, judged on the in-place spec
        print(f"{len(trace.ops):,} calls, judged on the in-place spec (models.incremental); the first and last:")
        print(f"store(max_bytes={trace.max_bytes}, object_nbytes={trace.object_nbytes}, profile={trace.profile})")
        for row in report_text.calls_by_ends(trace.ops):
            print(row)
    else:
        print(printable(explain(trace), newlines=True))
    divergence = _compare(trace, target)
    if divergence is None:
        print(f"{target.label} agrees with the spec on this input" + ("; no vector written" if args.save else ""))
        return 0
    print(report_text.clip_lines(divergence.render()))
    print(f"signature: {signature(divergence)}")
    if args.save is None:
        print("to keep it as a regression vector: the same command with --save DIR")
        return 1
    cut = replace(trace, ops=trace.ops[: divergence.step + 1])
    args.save.mkdir(parents=True, exist_ok=True)
    name = args.file.name.removesuffix(".jsonl").replace(".", "_")
    out = args.save / f"{name}.jsonl"
    description = f"reproduced from {args.file.name}; diverged on {target.label}"
    traces.write(traces.vector_from_trace(cut, name, description), out)
    print(f"regression vector written to {out}")
    for line in _commands(args, out):  # run as printed in a fresh shell, as verify's
        print(line)
    return 1


def explain(trace: Trace) -> str:
    """Each op with the spec's outcome and the recency order after it."""
    rows = [f"store(max_bytes={trace.max_bytes!r}, object_nbytes={trace.object_nbytes!r}, profile={trace.profile})"]
    built = expected_new(trace)
    if isinstance(built, Err):  # then the spec runs no op (a file's expect_new may say otherwise)
        rows.append(f"     -> {show(built, None)}: the store cannot be built, no op runs")
        return "\n".join(rows)
    for number, (op, (outcome, snapshot)) in enumerate(zip(trace.ops, expected_outcomes(trace), strict=True), 1):
        pins = dict(snapshot.references)
        keys = [k for k, _ in snapshot.entries]
        if len(keys) > 2 * ROW_ENDS:  # a long row is shown by its ends, as explain shows it
            keys[ROW_ENDS:-ROW_ENDS] = [f"… {len(keys) - 2 * ROW_ENDS:,} more …"]
        order = " ".join(f"{k}*{pins[k]}" if k in pins else k for k in keys)
        # A read's value as its length and first bytes (compare.show), never a line of kilobytes.
        rows.append(report_text.clip(f"{number:>3}. {describe(op):<60} -> {show(outcome, None)}"))
        unstored = sorted(set(pins).difference(k for k, _ in snapshot.entries))
        rows.append(
            report_text.clip(
                f"      LRU [ {order} ] MRU"
                + (f"  unstored pins {some([f'{k}={pins[k]}' for k in unstored])}" if unstored else "")
            )
        )
    return "\n".join(rows)


def _vectors(args: argparse.Namespace) -> int:

    if args.generate:
        written = vectors.generate(args.folder)
        print(f"wrote {len(written)} vectors to {args.folder}")
        return 0
    try:
        loaded = verify.survey_vectors([args.folder])
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


def _errors(given: list[str]) -> Any:
    """``--error module:Class=kind`` options as ``Target.errors``."""
    mapping = {}
    for option in given:
        name, equals, kind = option.rpartition("=")
        if not equals:
            raise LookupError(f"--error {option!r}: give it as module:Class=kind")
        mapping[load_attribute(name)] = kind
    try:
        return errors_of(mapping)
    except (TypeError, ValueError) as error:
        raise LookupError(f"--error: {error}") from None


def _command(text: str) -> str:
    """A port command: non-empty, and parsed as a shell would."""
    try:
        parse_command(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give a count of at least 1")
    return value


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


def _large_bytes(text: str) -> int:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of bytes") from None
    least = large.MIN_CAPACITY * large.OBJECT_NBYTES
    if not math.isfinite(value) or value < least or value > 1e15:
        raise argparse.ArgumentTypeError(f"{text!r}: give a number of bytes from {least:,} to 1e15")
    return int(value)


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
    if isinstance(value, Divergence):
        return value.as_json()
    raise TypeError(f"{type(value).__name__} is not JSON")


_RATE_FIGURES = ("traces", "ops", "seconds", "traces_per_s", "ops_per_s")  # a phase's own figures follow them


def _say_reach(reach: verify.Reach, say: Any) -> None:
    say(
        f"reached: {reach.slots} slots, objects of {reach.object_nbytes} bytes, {reach.keys} keys in a trace "
        f"({reach.keys_over_slots:.1f} per slot), {reach.ops} ops, pin count {reach.pins}, lists of {reach.key_list}"
    )
    for name, figures in reach.phases.items():
        more = "".join(
            f", {key} {value:g}"
            for key, value in figures.items()
            if key not in _RATE_FIGURES and not isinstance(value, bool)  # the guided phase's corpus and arcs
        )
        say(
            f"{name}: {figures['traces']:g} traces, {figures['ops']:g} ops in {figures['seconds']:g} s "
            f"({figures['traces_per_s']:g} traces/s, {figures['ops_per_s']:g} ops/s{more})"
        )
    short = reach.short_of()
    if short:
        say(f"scope NOT reached in this run: {'; '.join(short)}")


class _Progress:
    """On a terminal, a ``rich`` progress bar per phase (gone when it ends);
    elsewhere nothing: a log gets the one line each phase prints."""

    def __init__(self, enabled: bool, console: Any = None) -> None:
        self.bar: Any = None
        self.task: Any = None
        self.budget: float | None = None
        if enabled:
            from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

            columns = (TextColumn("{task.description}"), BarColumn(), TimeRemainingColumn())
            self.bar = Progress(*columns, transient=True, console=console)

    def __enter__(self) -> _Progress:
        if self.bar is not None:
            self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()

    def start(self, name: str, total: int | None, seconds: float | None = None) -> None:
        """A phase of ``total`` steps, or of ``seconds`` of search."""
        if self.bar is None:
            return
        if self.task is not None:
            self.bar.remove_task(self.task)
        self.budget = seconds
        self.task = self.bar.add_task(name, total=total if total is not None else seconds)

    def update(self, done: int) -> None:
        if self.bar is not None:
            self.bar.update(self.task, completed=done)

    def left(self, seconds: float) -> None:
        """A search with ``seconds`` left of its budget."""
        if self.bar is not None and self.budget is not None:
            self.bar.update(self.task, completed=max(self.budget - seconds, 0.0))


def _say(quiet: bool, verbose: bool = False) -> Any:
    """How verify prints a line: to stderr under --json; at most
    ``report_text.WIDTH`` characters unless --verbose."""

    def say(text: str) -> None:
        shown = text if verbose else report_text.clip_lines(text)
        print(shown, file=sys.stderr if quiet else sys.stdout, flush=True)

    return say


if __name__ == "__main__":
    sys.exit(main())
