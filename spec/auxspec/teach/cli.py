"""``auxspec explain`` and ``auxspec play``: their arguments and what they do.

``auxspec.cli`` only registers these (``add_commands``) and hands the parsed
arguments over (``run``); everything else lives here.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from auxspec.drivers import remote_command
from auxspec.drivers import report as report_text
from auxspec.drivers.gated import Violation, run_scenario
from auxspec.drivers.gated import describe as describe_step
from auxspec.drivers.protocol import ProtocolError, check_op_timeout
from auxspec.drivers.verify import exec_target, is_deep, judge_long
from auxspec.engine import traces
from auxspec.engine.codec import decode
from auxspec.engine.ops import ALL, Trace, numbered, runs
from auxspec.engine.target import Target, load_target
from auxspec.engine.traces import TraceError, printable
from auxspec.generators.background import Release, Scenario, vector_scenario
from auxspec.models.sequential import Outcome
from auxspec.teach import terminal
from auxspec.teach.html import page
from auxspec.teach.play import main_play
from auxspec.teach.timeline import TooLong, timeline

COMMANDS = ("explain", "play")
BUNDLED = "auxstore"  # --target with no value: the bundled store
FOUND_BY = "found by auxspec verify on "  # how verify describes the divergence files it writes


def add_commands(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    explain = commands.add_parser(
        "explain",
        help="step through a trace, a vector, a divergence or a fuzzer finding",
        description="Show each op of FILE step by step: the recency order from least to most recent, pin "
        "counts, the batch's protected keys, terminal keys, what was evicted and why, the outcome. With "
        "--target or --exec, run it on that store too and show expected and actual side by side.",
    )
    explain.add_argument(
        "file", type=Path, help="a trace or vector (.jsonl), a divergence from verify, or a fuzzer input"
    )
    explain.add_argument(
        "--html", type=Path, metavar="OUT", help="also write a self-contained HTML page to step through"
    )
    explain.add_argument(
        "--target",
        nargs="?",
        const=BUNDLED,
        help="compare with this store (as for verify; no value: the bundled auxstore)",
    )
    explain.add_argument("--exec", dest="exec_command", metavar="CMD", help="compare with a port process")
    explain.add_argument("--op-timeout", type=op_timeout, default=5.0, help="seconds a port process may take per op")
    explain.add_argument(
        "--fuzz", action="store_true", help="read FILE as a raw fuzzer input even if it looks like JSON"
    )
    explain.add_argument("--profile", choices=("strict", "upstream"), default="strict", help="for a fuzzer input")
    explain.add_argument("--color", choices=("auto", "always", "never"), default="auto")
    explain.add_argument("--verbose", action="store_true", help="print long lines whole (plain text)")

    play = commands.add_parser(
        "play",
        help="type ops against the spec and watch the store change",
        description="An interactive prompt over the spec: type put/get/release/... and see the store after "
        "each step; undo; save the session as a trace file. Type 'help' at the prompt.",
    )
    play.add_argument("--max-bytes", type=int, default=6)
    play.add_argument("--object-nbytes", type=int, default=2)
    play.add_argument("--profile", choices=("strict", "upstream"), default="strict")
    play.add_argument("--color", choices=("auto", "always", "never"), default="auto")


def op_timeout(text: str) -> float:
    """An ``--op-timeout`` option (docs/protocol.md, Limits)."""
    try:
        return check_op_timeout(float(text))
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"{text!r}: {error}") from None


def run(args: argparse.Namespace) -> int:
    if args.command == "play":
        return main_play(args)
    return explain(args)


@dataclass(frozen=True)
class Input:
    """What ``auxspec explain`` read: the trace and how to title it."""

    trace: Trace
    title: str
    description: str = ""
    recorded: tuple[Outcome, ...] | None = None
    notes: tuple[str, ...] = ()


def read_input(path: Path, profile: str = "strict", fuzz: bool = False, features: frozenset[str] = ALL) -> Input:
    """A trace file (named ``.jsonl``, or whose header line is a JSON object
    with ``format``), or else a fuzzer input decoded with the op alphabet
    (any file, with ``fuzz``). Read within ``traces.file_limits()``.

    raises: TraceError"""
    if not fuzz and (path.suffix == ".jsonl" or traces.header_format(path) is not None):
        vector = traces.load(path, held=True)
        notes: tuple[str, ...] = ()
        if vector.description.startswith(FOUND_BY):
            label = vector.description[len(FOUND_BY) :]
            notes = (
                f"written by auxspec verify: the last step is where {label} diverged from the spec; "
                "add --target (or --exec) to see that store's side next to the spec's",
            )
        return Input(vector.trace, vector.name or path.name, vector.description, vector.expected, notes)
    data = traces.read_bytes(path)
    trace = decode(data, profile, features)
    note = f"{len(data)} bytes decoded as a fuzzer input (auxspec.engine.codec.decode, profile {profile})"
    return Input(trace, path.name, "", None, (note,))


def explain(args: argparse.Namespace) -> int:
    if not args.fuzz and remote_command.is_counterexample(args.file):
        return _explain_remote(args)
    if not args.fuzz and traces.is_background(args.file):
        return explain_background(args)
    target: Target | None = None
    stop = None
    try:
        if args.exec_command and args.target:
            raise LookupError("give --target or --exec, not both")
        if args.target is not None:
            target = load_target(None if args.target == BUNDLED else args.target)
        features = target.features if target else ALL
        given = read_input(args.file, args.profile, args.fuzz, features)
        most_held = traces.held_keys_limit()
        if args.exec_command:
            target, stop = exec_target(args.exec_command, args.op_timeout)
    except (LookupError, TraceError, OSError, ImportError, ProtocolError) as error:
        print(f"auxspec: {error}", file=sys.stderr)
        return 2
    if is_deep(given.trace):
        try:
            return explain_long(given.trace, args.file, target)
        finally:
            if stop:
                stop()
    try:
        try:
            line = timeline(given.trace, given.title, given.description, given.recorded, most_held)
        except TooLong as error:
            print(f"auxspec: {args.file}: {error} ({traces.KEYS_VARIABLE} raises the limit)", file=sys.stderr)
            return 2
        line = replace(line, notes=given.notes)
        if target is not None:
            from auxspec.teach.divergence import against

            try:
                line = against(line, given.trace, target)
            except ProtocolError as error:
                print(f"auxspec: the port broke the protocol: {error}", file=sys.stderr)
                return 2
    finally:
        if stop:
            stop()
    colour = {"always": True, "never": False}.get(args.color)
    terminal.show(line, sys.stdout, colour, full=args.verbose)
    if args.html:
        try:
            args.html.write_text(page(line), encoding="utf-8")
        except OSError as error:
            print(f"auxspec: {error}", file=sys.stderr)
            return 2
        print(f"HTML written to {args.html}")
    return 1 if target is not None and line.diverges_at is not None else 0


def _explain_remote(args: argparse.Namespace) -> int:
    """A remote counterexample: each call with what the remote profile allowed;
    with --target or --exec, replayed on that store too (on the engine it was found on: its variables)."""
    try:
        lines = remote_command.explain(args.file)
        code = 0
        if args.target is not None or args.exec_command:
            target = None if args.target in (None, BUNDLED) else args.target
            code, replayed = remote_command.replay_on(args.file, target, args.exec_command, args.op_timeout)
            lines += ["", *replayed]
    except (LookupError, TraceError, OSError, ImportError, ProtocolError) as error:
        print(f"auxspec: {error}", file=sys.stderr)
        return 2
    for line in lines:
        print(line)
    return code


def explain_long(trace: Trace, path: Path, target: Target | None) -> int:
    """``auxspec explain`` of a deep trace (a depth catch of tens of
    thousands of calls): step by step it would be that many screens, so its
    calls are shown by their ends; with a target, it is judged as the depth
    phase judges it (``verify.judge_long``) and the calls up to the one that
    differs are shown with both sides."""
    print(f"{path.name}: {len(trace.ops):,} calls, too many to step through: the first and the last")
    print(f"store(max_bytes={trace.max_bytes}, object_nbytes={trace.object_nbytes}, profile={trace.profile})")
    for row in report_text.calls_by_ends(trace.ops, describe_step):
        print(row)
    if target is None:
        print("add --target (or --exec) to run it on a store and see where that store differs")
        return 0
    try:
        found = judge_long(trace, target)
    except ProtocolError as error:
        print(f"auxspec: the port broke the protocol: {error}", file=sys.stderr)
        return 2
    if found is None:
        print(f"{target.label} agrees with the spec on all {len(trace.ops):,} calls (the in-place spec's outcomes)")
        return 0
    print(report_text.headline(found, f"explain, on {target.label}"))
    print(report_text.clip_lines(found.render(last=report_text.SHOWN_OPS)))
    return 1


def background_steps(scenario: Scenario) -> list[str]:
    """A background scenario as rows: the store, then each owner call and
    each of the writer's releases in order, then the ending."""
    faults = ", ".join(f"inner call {index + 1} raises {make.__name__}" for index, make in scenario.faults)
    rows = [
        f"background store(max_pending_batches={scenario.max_pending_batches!r}) over "
        f"{'no inner store' if scenario.inner == 'none' else 'store'}(max_bytes={scenario.max_bytes}, "
        f"object_nbytes={scenario.object_nbytes}, profile={scenario.profile})"
        + (f"; faults: {faults}" if faults else "")
    ]
    calls = 0
    for _, step, count in runs(scenario.ops):  # an owner call made many times in a row: one row, × N
        if isinstance(step, Release):
            rows.extend([f"      writer: may apply {step.batches} more batch(es) to the inner store"] * count)
        else:
            times = f" × {count:,}" if count > 1 else ""
            rows.append(f"{numbered(calls, count):>4}. {describe_step(step)}{times}")
            calls += count
    rows.append("      then the owner " + ("closes the store" if scenario.ending == "close" else "drops it unclosed"))
    return [report_text.clip(row) for row in rows]


def explain_background(args: argparse.Namespace) -> int:
    """``auxspec explain`` of a background vector: its owner calls and the
    writer's schedule step by step; with --target, the scenario run on that
    store's background class (the writer held and let go as recorded) and
    what it did that the background spec does not allow."""
    try:
        if args.exec_command:
            raise LookupError("a background vector needs a Python target (--target): a port process has no writer")
        scenario = vector_scenario(traces.load_background(args.file))
        target = None if args.target is None else load_target(None if args.target == BUNDLED else args.target)
        if target is not None and (target.background is None or target.observe is None):
            raise LookupError(f"{target.label} has no background store (or no snapshot()) to run this on")
    except (LookupError, OSError, ImportError, TraceError, ValueError) as error:
        print(f"auxspec: {error}", file=sys.stderr)
        return 2
    print(f"{args.file.name}: a background vector (profile {scenario.profile}): the owner's calls and the writer's")
    print("schedule, as verify ran them; the writer applies queued batches only where a release step says so")
    for row in background_steps(scenario):
        print(printable(row))
    if target is None:
        print("add --target to run it on a store's background class and see what it does against the spec")
        return 0
    try:
        run_scenario(target, scenario)
    except Violation as violation:
        for line in report_text.clip_lines(str(violation)).split("\n"):
            print(line)
        print(f"{target.label}'s background store did what the background spec does not allow")
        return 1
    print(f"{target.label}'s background store agrees with the background spec on this scenario")
    return 0


def pointer(out: Path, target: str | None, exec_command: str | None) -> str:
    """The line ``auxspec verify`` prints under a counterexample."""
    if exec_command:
        how = f" --exec {shlex.quote(exec_command)}"
    else:
        how = f" --target {shlex.quote(target)}" if target else " --target"
    return f"step through it: auxspec explain {shlex.quote(str(out))}{how} [--html divergence.html]"
