"""``auxspec verify --profile remote``, and ``reproduce`` / ``explain`` of what it writes.

verify judges TARGET (or a port process under ``--exec``) with the remote
judge (``drivers.remote``) against an engine (``drivers.remote_engines``:
the Redis server of ``AUXSTORE_REDIS_URL`` or the Mooncake master of
``AUXSTORE_MOONCAKE_MASTER``), under the model options that engine needs,
deleting objects between calls as an engine may, for ``--max-time`` seconds
(or ``--max-traces`` traces). It reports the options, the scope it reached,
the evictions it saw (the engine's own counter, and its deletions), and the
verdict; an engine failure ends the run without one. A violation is
shrunk with ``drivers.shrink`` (the judge is its test), written to
``--out`` as a remote counterexample file (its format: ``FORMAT``; the ops
are the op alphabet's trace lines) and followed by the explain and
reproduce commands, printed by ``drivers.report`` as for the other profiles.
"""

from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

from auxspec.drivers import redis_engine, remote_engines, shrink
from auxspec.drivers import report as report_text
from auxspec.drivers.protocol import process_target
from auxspec.drivers.remote import EngineFailure, Report, Violation, judge_evicting, search
from auxspec.drivers.remote_engines import Engine, Evictor, judged_with, say_options
from auxspec.engine import traces
from auxspec.engine.ops import Trace
from auxspec.engine.table import describe, kind_of
from auxspec.engine.target import Target
from auxspec.engine.traces import TraceError
from auxspec.models import remote
from auxspec.models.sequential import Outcome
from auxspec.reference import binding

FORMAT = "auxspec-remote-counterexample"
VERSION = 1
SIDE = 40  # the most of each side (allowed, got) a headline shows
DEFAULT_TRACES = 1_000_000  # --max-traces unset: the time decides


@dataclass(frozen=True)
class Counterexample:
    """A remote counterexample file: the trace, and how verify ran it."""

    trace: Trace
    target: str
    deletions: int | None  # the seed of the deletions between calls; None: none were made
    rate: float
    observed: str  # what the store returned at the last call
    seen: tuple[Outcome, ...]  # the allowed outcomes the calls before it returned
    engine: str = "redis"  # the engine verify ran against (files before the Mooncake engine: Redis)
    options: tuple[str, ...] = ()  # the model options it was judged under (remote_engines.OPTIONS)


def dumps(violation: Violation, target: str, rate: float, engine: str = "redis", options: tuple[str, ...] = ()) -> str:
    trace = violation.trace
    header = {
        "format": FORMAT,
        "version": VERSION,
        "profile": remote.PROFILE,
        "target": target,
        "max_bytes": trace.max_bytes,
        "object_nbytes": trace.object_nbytes,
        "deletions": violation.deletions,
        "rate": rate,
        "observed": violation.observed,
        "engine": engine,
        "options": list(options),
    }
    lines = [json.dumps(header)]
    for number, op in enumerate(trace.ops):
        line = traces.op_to_json(op)
        if number < len(violation.seen):
            line["seen"] = traces.outcome_to_json(violation.seen[number])
        lines.append(json.dumps(line))
    return "\n".join(lines) + "\n"


def is_counterexample(path: Path) -> bool:
    """Whether ``path`` starts with a remote counterexample's header."""
    return traces.header_format(path) == FORMAT


def load(path: Path) -> Counterexample:
    """raises: TraceError"""
    where = str(path)
    try:
        text = traces.read_bytes(path).decode("utf-8")  # within the trace files' size limit
        rows = [traces.parse_json(line) for line in text.splitlines() if line.strip()]
    except (OSError, ValueError) as error:
        raise TraceError(f"{where}: cannot read: {error}") from None
    if not rows or not isinstance(rows[0], dict) or rows[0].get("format") != FORMAT:
        raise TraceError(f"{where}: not a remote counterexample (first line: format {FORMAT!r})")
    header = rows[0]
    if header.get("version") != VERSION:
        raise TraceError(f"{where}: version {header.get('version')!r}, this auxspec reads {VERSION}")
    ops, seen = [], []
    for number, row in enumerate(rows[1:], start=2):
        ops.append(traces.op_from_json(row, f"{where}:{number}"))
        if isinstance(row, dict) and "seen" in row:
            seen.append(traces.outcome_from_json(row["seen"], f"{where}:{number}"))
    deletions = header.get("deletions")
    rate = header.get("rate", redis_engine.RATE)
    if not (deletions is None or type(deletions) is int) or not isinstance(rate, (int, float)):
        raise TraceError(f"{where}: deletions must be an integer or null and rate a number")
    engine, options = header.get("engine", "redis"), header.get("options", [])
    if engine not in remote_engines.ENGINES:
        raise TraceError(f"{where}: engine {engine!r}: one of {', '.join(remote_engines.ENGINES)}")
    if not isinstance(options, list) or any(option not in remote_engines.OPTIONS for option in options):
        raise TraceError(f"{where}: options must be a list of {', '.join(remote_engines.OPTIONS)}")
    trace = Trace("strict", header.get("max_bytes"), header.get("object_nbytes"), tuple(ops))
    observed = str(header.get("observed", ""))
    target = str(header.get("target", ""))
    return Counterexample(trace, target, deletions, float(rate), observed, tuple(seen), engine, tuple(options))


# ---------------------------------------------------------------------- verify


@dataclass(frozen=True)
class Options:
    """What ``auxspec verify --profile remote`` was given."""

    target: str | None
    exec_command: str | None
    op_timeout: float
    max_time: float
    max_traces: int | None
    seed: int | None
    out: Path
    verbose: bool
    engine: str | None = None  # --engine; None: the one whose variable is set


def connect_engine(name: str | None = None, environ: Any = None) -> Engine:
    """The engine ``--engine`` names (or whose variable is set), answering.

    raises: remote_engines.EngineUnavailable (one line: no variable, no client, no answer)"""
    return remote_engines.connect(name, os.environ if environ is None else environ)


def verify(options: Options, target: Target, engine: Engine, say: Any) -> tuple[int, dict[str, Any]]:
    """Judge ``target`` on ``engine``; the exit code and the report."""
    seed = options.seed if options.seed is not None else random.randrange(2**32)
    evictor = engine.evictor()
    say(f"verifying {report_text.middle(target.label, 120)} against the remote spec ({engine.name} {engine.address})")
    say(f"model options: {say_options(engine.options)}")
    evicted_before = engine.evicted()
    with judged_with(engine.options):
        found = search(
            target,
            seed,
            max_traces=options.max_traces or DEFAULT_TRACES,
            max_seconds=options.max_time,
            evictor=evictor,
        )
    evicted = engine.evicted() - evicted_before
    report: dict[str, Any] = {
        "profile": remote.PROFILE,
        "target": target.label,
        "seed": seed,
        "engine": engine.name,
        "server": engine.address,
        "options": list(engine.options),
    }
    _say_scope(found, evicted, engine, evictor, say)
    t = found.tally
    report["scope"] = {
        "traces": t.traces,
        "calls": t.calls,
        "read_hits": t.read_hits,
        "reads_of_gone": t.reads_of_gone,
        "puts_refused": t.puts_refused,
        "server_evicted": evicted,
        "deleted_between_calls": evictor.deleted,
        "deletions_refused": evictor.refused,
        "seconds": round(found.seconds, 1),
        "ended_by": found.ended_by,
    }
    if found.engine_failure is not None:
        failure = found.engine_failure
        say(report_text.clip(f"ENGINE FAILURE at trace {t.traces}, {failure}"))
        say("no verdict: an engine failure is no outcome of the profile, and says nothing of the store")
        report.update(result="engine failure", failure=str(failure))
        return 2, report
    if found.violation is None:
        if found.vacuous:
            say("NOTHING JUDGED: no read returned an object, so no outcome said anything of the store")
            report["result"] = "nothing judged"
            return 1, report
        say(
            f"conforms: {t.traces} traces, {t.calls} calls, every outcome one the remote profile allows "
            f"(search ended by {found.ended_by})"
        )
        report["result"] = "conforms"
        return 0, report
    return _diverged(options, target, found, engine, evictor, say, report)


def _say_scope(found: Report, evicted: int, engine: Engine, evictor: Evictor, say: Any) -> None:
    t = found.tally
    say(
        f"scope: seed {found.seed}, {t.traces} traces, {t.calls} calls in {found.seconds:.1f} s (ended by "
        f"{found.ended_by}); {t.read_hits} reads returned every object, {t.reads_of_gone} met an eviction, "
        f"{t.puts_refused} puts were refused for room"
    )
    say(
        f"evictions: the {engine.name} engine evicted {evicted} {engine.counter}, verify deleted "
        f"{evictor.deleted} of the stores' objects between calls"
    )
    if evictor.refusals():
        say(evictor.refusals())
    if t.reads_of_gone == 0:
        say("scope NOT reached in this run: no read met an eviction")


def _diverged(
    options: Options,
    target: Target,
    found: Report,
    engine: Engine,
    evictor: Evictor,
    say: Any,
    report: dict[str, Any],
) -> tuple[int, dict[str, Any]]:
    violation = found.violation
    assert violation is not None
    before = len(violation.trace.ops)
    seed = violation.deletions

    def fails(trace: Trace) -> Violation | None:
        try:
            return judge_evicting(trace, target, evictor, seed if seed is not None else 0)
        except EngineFailure:  # says nothing of the store: this candidate is not kept
            return None

    def cut(trace: Trace, failure: Violation) -> Trace:
        return replace(trace, ops=trace.ops[: failure.index + 1])

    with judged_with(engine.options):
        shrunk = shrink.shrink_trace(violation.trace, violation, fails, cut)
    violation = shrunk.failure
    lines = [headline(violation, f"the remote search, seed {found.seed}, trace {found.tally.traces}")]
    lines += violation.render().split("\n")
    lines.append(f"shrunk from {before} to {len(violation.trace.ops)} ops ({shrunk.tries} tries, {shrunk.ended_by})")
    options.out.parent.mkdir(parents=True, exist_ok=True)
    text = dumps(violation, target.label, evictor.rate, engine.name, engine.options)
    options.out.write_text(text, encoding="utf-8")
    lines.append(f"written to {options.out}")
    lines += commands(options.target, options.exec_command, options.out)
    for line in lines if options.verbose else report_text.fit(lines, report_text.LINES - 4):
        say(line)
    report.update(result="diverges", step=violation.index + 1, trace=str(options.out), observed=violation.observed)
    report["shrink"] = {"from_ops": before, "to_ops": len(violation.trace.ops), "tries": shrunk.tries}
    return 1, report


def headline(violation: Violation, phase: str) -> str:
    where = "building the store" if violation.index < 0 else f"step {violation.index + 1}, "
    call = "" if violation.index < 0 else report_text.clip(describe(violation.trace.ops[violation.index]), 60)
    allowed = report_text.clip(" or ".join(_show(outcome) for outcome in violation.allowed), SIDE)
    got = report_text.clip(violation.observed, SIDE)
    return report_text.clip(f"DIVERGES (found by {phase}): {where}{call}: allowed {allowed}, got {got}")


def commands(target: str | None, exec_command: str | None, path: Path) -> list[str]:
    """explain and reproduce, as a fresh shell runs them (the server's URL in them)."""
    given = report_text.target_words(target, exec_command)
    lines = report_text.wrapped("explain:  ", report_text.command(["explain", str(path), *given]))
    lines += report_text.wrapped("reproduce:", report_text.command(["reproduce", str(path), *given]))
    return lines


def _show(outcome: Outcome) -> str:
    from auxspec.engine.compare import show

    return show(outcome, None)


# ------------------------------------------------------- reproduce and explain


def load_target_of(target: str | None, exec_command: str | None, op_timeout: float) -> tuple[Target, Any]:
    """The target ``reproduce``/``explain`` name, and how to stop it (None for a Python one)."""
    if exec_command:
        made = process_target(exec_command, op_timeout)
        return made.target, made.close
    from auxspec.engine.target import load_target

    return load_target(target), None


def engine_of(path: Path, environ: Any = None) -> Engine:
    """The engine the counterexample at ``path`` was found on, connected.

    raises: TraceError, remote_engines.EngineUnavailable"""
    return connect_engine(load(path).engine, environ)


def replay_on(path: Path, target: str | None, exec_command: str | None, op_timeout: float) -> tuple[int, list[str]]:
    """``replay`` of ``path`` on the engine it was found on and the target
    named (a module path, or a port command), both let go afterwards: what
    ``reproduce`` and ``explain --target`` of a remote counterexample run.

    raises: LookupError, OSError, ImportError, TraceError, ProtocolError"""
    stop: Any = None
    engine: Engine | None = None
    try:
        engine = engine_of(path)
        loaded, stop = load_target_of(target, exec_command, op_timeout)
        return replay(path, loaded, engine)
    finally:
        if stop is not None:
            stop()
        if engine is not None:
            engine.close()


def replay(path: Path, target: Target, engine: Engine) -> tuple[int, list[str]]:
    """Run the counterexample at ``path`` on ``target`` with its deletions, on
    ``engine`` and under its model options: 1 and the violation when it
    recurs, 0 when the target's outcomes are all allowed, 2 when the engine failed.

    raises: TraceError"""
    given = load(path)
    evictor = engine.evictor(given.rate)
    seed = given.deletions
    lines = [f"replaying the remote counterexample {path.name} on {target.label}"]
    lines.append(f"(on {engine.name} {engine.address}; model options: {say_options(given.options)})")
    if seed is not None:
        lines.append(f"(with verify's deletions between calls, seed {seed})")
    try:
        with judged_with(given.options):
            found = judge_evicting(given.trace, target, evictor if seed is not None else None, seed or 0)
    except EngineFailure as failure:
        lines.append(f"ENGINE FAILURE: {failure}; no verdict")
        return 2, lines
    if found is None:
        lines.append(f"{target.label}: every outcome was one the remote profile allows on this trace")
        return 0, lines
    lines.append(headline(found, "reproduce"))
    lines += found.render().split("\n")
    return 1, lines


def explain(path: Path) -> list[str]:
    """Each call of the counterexample at ``path``: what the remote profile
    allowed there (following what the store returned before), and what it returned."""
    given = load(path)
    trace = given.trace
    lines = [f"{path.name}: a remote counterexample written by auxspec verify on {given.target}"]
    lines.append(f"engine: {given.engine}; model options: {say_options(given.options)}")
    with judged_with(given.options):
        state = remote.new(binding.as_size(trace.max_bytes), binding.as_size(trace.object_nbytes))
    if given.deletions is not None:
        lines.append(
            f"between calls verify deleted keys the store wrote, as an engine may (seed {given.deletions}, each key "
            f"with probability {given.rate:g}): a read that failed missing met one"
        )
    lines.append(f"store(max_bytes={trace.max_bytes!r}, object_nbytes={trace.object_nbytes!r}), profile remote")
    if not isinstance(state, remote.State):
        lines.append(f"     -> {_show(state)}: the store cannot be built; it returned {given.observed}")
        return lines
    for number, op in enumerate(trace.ops):
        allowed = cast(remote.Allowed, kind_of(op).step(remote, cast(Any, state), op))
        choices = " or ".join(_show(outcome) for outcome in allowed.outcomes())
        lines.append(report_text.clip(f"{number + 1:>3}. {describe(op)}"))
        if number < len(given.seen):
            got = given.seen[number]
            lines.append(report_text.clip(f"      allowed: {choices}; the store returned {_show(got)}"))
            after = allowed.after(got)
            if after is None:
                lines.append("      (not allowed: the file was edited?)")
                return lines
            state = after
            maybe = ", ".join(key for key, _ in state.objects) or "nothing"
            lines.append(report_text.clip(f"      may still be stored: {maybe}"))
        else:
            returned = f"the store returned {given.observed}: NOT ALLOWED"
            lines.append(report_text.clip(f"      allowed: {choices}; {returned}"))
    return lines
