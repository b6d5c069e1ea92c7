"""One report for every phase (issue 28, points 4, 5 and 8): a counterexample
is shrunk whatever found it (a background scenario with its writer
schedule too), written to --out as a vector that ``auxspec reproduce``
replays to the same divergence, with commands that run as printed in a
fresh shell; lines and reports are short by default; verify's own failure
is verify's; a count budget explores the same traces on any machine."""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from auxspec import cli
from auxspec.drivers import report, shrink, verify
from auxspec.engine import traces
from auxspec.engine.compare import compare, raised_by_verifier
from auxspec.engine.ops import Close, Get, Put, Trace
from auxspec.engine.target import load_target
from auxspec.generators.background import Release, Scenario, scenario_vector, vector_scenario

ROOT = Path(__file__).resolve().parents[1]
PORTS = ROOT / "tests" / "ports"
CLOSE_DROPS_QUEUED = PORTS / "subtle" / "h_close_drops_queued.py"


def _simple_port(tmp_path: Path, bug: str) -> Path:
    path = tmp_path / f"port_{bug.replace('-', '_')}.py"
    path.write_text(
        f"import sys\nsys.path.insert(0, {str(PORTS)!r})\n"
        f"from simple_port import make\nBlockObjectStore = make({bug!r})\n"
    )
    return path


def _padded_eviction_trace() -> Trace:
    """evict-most-recent's bug (a full store and one more put: the most
    recent key goes, not the least) among calls that play no part in it."""
    ops = (
        Put((("k9", b"\x05\x05"),), ("k9",)),
        Get(("k9",)),
        Put((), (), ("k9",)),
        Put((("a", b"\x01\x02"),)),
        Get(("a",)),
        Put((("c", b"\x07\x07"),)),
        Get(("c",)),
        Get(("c", "a")),
        Close(),
    )
    return Trace("strict", 4, 2, ops)


def test_a_sequential_counterexample_is_shrunk_to_the_calls_the_bug_needs(tmp_path: Path) -> None:
    target = load_target(str(_simple_port(tmp_path, "evict-most-recent")))
    found = compare(_padded_eviction_trace(), target)
    assert found is not None and found.deviation is None
    shrunk = verify.shrink_divergence(found, target)
    assert shrunk.ended_by == "fixpoint"
    assert len(shrunk.value.ops) <= 4 < found.step + 1, shrunk.value
    # The shrunk trace still diverges, at its last op, and the bundled store agrees with it.
    again = compare(shrunk.value, target)
    assert again is not None and again.step == len(shrunk.value.ops) - 1
    assert compare(shrunk.value, load_target(None)) is None


def test_the_shrink_budget_is_a_count() -> None:
    calls = []

    def fails(trace: Trace) -> object:
        calls.append(trace)
        return "still" if trace.ops else None

    trace = Trace("strict", 4, 2, tuple(Get(("a",)) for _ in range(40)))
    shrunk = shrink.shrink_trace(trace, "still", fails, lambda t, _: t, tries=5)
    assert shrunk.ended_by == "count" and shrunk.tries == 5 == len(calls)


def _padded_background_scenario() -> Scenario:
    """h_close_drops_queued's bug (three batches queued at close) after
    calls that play no part in it, with writer releases among them."""
    ops = (
        Put((("z", b"\x02"),)),
        Release(1),
        Get(("z",)),
        Put((("y", b"\x03"),)),
        Release(2),
        Put((), ("k0",)),
        Put((), (), ("k0",)),
        Put((("k0", b"\x00"),)),
        Close(),
    )
    return Scenario("strict", 4, 1, 2, ops)


def test_a_background_counterexample_is_shrunk_written_and_replayed_with_its_schedule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = load_target(str(CLOSE_DROPS_QUEUED))
    fails = verify.background_fails(target)
    padded = _padded_background_scenario()
    violation = fails(padded)
    assert violation is not None, "the padded scenario must show the port's bug"
    shrunk = verify.shrink_background(verify.BackgroundFound(padded, violation), target)
    assert shrink.owner_calls(shrunk.value) < shrink.owner_calls(padded)
    assert shrink.owner_calls(shrunk.value) <= 4, shrunk.value
    # Written with its schedule and read back as the same scenario.
    out = tmp_path / "bg.jsonl"
    out.write_text(traces.dumps_background(scenario_vector(shrunk.value, "bg")), encoding="utf-8")
    assert traces.is_background(out) and not traces.is_background(ROOT / "spec/auxspec/vectors/strict" / "x.jsonl")
    assert vector_scenario(traces.load_background(out)) == shrunk.value
    # reproduce replays it to the same violation on the port, and the bundled store agrees.
    assert cli.main(["reproduce", str(out), "--target", str(CLOSE_DROPS_QUEUED)]) == 1
    assert violation.split("\n")[0].split(": ", 1)[1] in capsys.readouterr().out
    assert cli.main(["reproduce", str(out)]) == 0
    assert "agrees with the background spec" in capsys.readouterr().out
    # Under another name (verify --out found.vec) it is still read as a background vector.
    renamed = out.rename(tmp_path / "found.vec")
    assert traces.is_background(renamed)
    assert cli.main(["reproduce", str(renamed), "--target", str(CLOSE_DROPS_QUEUED)]) == 1


def test_a_background_vector_keeps_faults_releases_and_bad_bounds(tmp_path: Path) -> None:
    from auxspec.generators.background import FAULT_TYPES

    scenario = Scenario(
        "strict", 6, 2, 3, (Release(2), Put((("a", b"\x01\x01"),), ("a",), ("b",), "tuple"), Close()),
        ((4, FAULT_TYPES[1]),), ending="drop",
    )  # fmt: skip
    out = tmp_path / "bg.jsonl"
    out.write_text(traces.dumps_background(scenario_vector(scenario, "n", "d")), encoding="utf-8")
    assert vector_scenario(traces.load_background(out)) == scenario
    # A sequential reader refuses it by its header, not with a wrong replay.
    with pytest.raises(traces.TraceError, match="format"):
        traces.load(out)


@pytest.mark.slow  # a 30 s verify (the fast version: the shrink, write and replay test above)
@pytest.mark.timeout(300)
def test_verify_reports_a_background_catch_through_the_one_pipeline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "found.jsonl"
    argv = ["verify", str(CLOSE_DROPS_QUEUED), "--max-time", "30", "--seed", "1", "--out", str(out)]
    assert cli.main([*argv, "--large-stores", "off"]) == 1
    printed = capsys.readouterr().out
    lines = printed.splitlines()
    assert len(lines) <= report.LINES and max(map(len, lines)) <= report.WIDTH, printed
    assert any(line.startswith("DIVERGES (found by the background phase") for line in lines), printed
    assert traces.is_background(out)
    # The printed command runs as printed in a fresh shell, from another directory, and replays the divergence.
    reproduce = _command(lines, "reproduce:")
    ran = subprocess.run(["/bin/sh", "-c", reproduce], cwd="/", env=_fresh_env(), capture_output=True, text=True)
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert "does not allow" in ran.stdout


def _command(lines: list[str], label: str) -> str:
    """A printed command, its continuation lines joined."""
    start = next(i for i, line in enumerate(lines) if line.startswith(label))
    parts = [lines[start][len(label) :]]
    while parts[-1].endswith("\\"):
        start += 1
        parts[-1] = parts[-1][:-1]
        parts.append(lines[start])
    return " ".join(part.strip() for part in parts)


def _fresh_env() -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp")}


@pytest.mark.timeout(300)
def test_a_sequential_catch_is_short_shrunk_and_its_commands_run_as_printed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port = _simple_port(tmp_path, "evict-most-recent")
    out = tmp_path / "found.jsonl"
    argv = ["verify", str(port), "--max-time", "5", "--seed", "2", "--out", str(out), "--large-stores", "off"]
    assert cli.main(argv) == 1
    printed = capsys.readouterr().out
    lines = printed.splitlines()
    assert len(lines) <= report.LINES and max(map(len, lines)) <= report.WIDTH, printed
    head = next(line for line in lines if line.startswith("DIVERGES (found by"))
    assert "expected" in head and "got" in head, head  # the op, expected against got
    assert len(traces.load(out).trace.ops) <= 5
    for label, code in (("explain:", 1), ("reproduce:", 1)):
        command = _command(lines, label)
        ran = subprocess.run(["/bin/sh", "-c", command], cwd="/", env=_fresh_env(), capture_output=True, text=True)
        assert ran.returncode == code, (command, ran.stdout, ran.stderr)


def test_a_failing_vector_is_named_by_its_own_name_and_shrunk(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "vectors"
    folder.mkdir()
    vector = traces.vector_from_trace(_padded_eviction_trace(), "padded-eviction", "a vector")
    traces.write(vector, folder / "padded.jsonl")
    port = _simple_port(tmp_path, "evict-most-recent")
    out = tmp_path / "found.jsonl"
    argv = ["verify", str(port), "--vectors", str(folder), "--max-time", "1", "--out", str(out)]
    assert cli.main(argv) == 1
    printed = capsys.readouterr().out
    assert "DIVERGES (found by vector padded-eviction)" in printed, printed
    written = traces.load(out)
    assert written.name == "padded-eviction"
    assert len(written.trace.ops) < len(vector.trace.ops)


def test_a_long_line_is_cut_with_a_pointer_to_verbose() -> None:
    line = "start " + "x" * 1000 + " (protocol 2)"
    cut = report.clip(line)
    assert len(cut) == report.WIDTH and "--verbose shows all" in cut
    assert cut.startswith("start x") and cut.endswith("x (protocol 2)")
    assert report.clip("short") == "short"
    kept = report.fit([str(i) for i in range(100)], 20)
    assert len(kept) == 20 and kept[-1] == "99" and "not shown" in kept[3]


def test_an_assertion_of_the_verifier_is_told_from_the_ports(tmp_path: Path) -> None:
    engine = Path(verify.__file__).resolve().parents[1] / "engine" / "table.py"
    spaces: dict[str, object] = {}
    exec(compile("def boom():\n    assert False, 'the model lost a key'\n", str(engine), "exec"), spaces)
    exec(compile("def port():\n    assert False, 'the port lost a key'\n", str(tmp_path / "p.py"), "exec"), spaces)
    caught = []
    for name in ("boom", "port"):
        try:
            spaces[name]()  # type: ignore[operator]
        except AssertionError as error:
            caught.append(raised_by_verifier(error))
    assert caught == [True, False]


def test_verify_s_own_failure_has_its_own_exit_status(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(*args: object, **kwargs: object) -> object:
        raise AssertionError("an invariant of verify itself")

    monkeypatch.setattr(verify, "exhaust", broken)
    assert cli.main(["verify", "--max-time", "1", "--large-stores", "off"]) == report.INTERNAL_ERROR
    said = capsys.readouterr()
    assert "INTERNAL ERROR" in said.err and "not a divergence of the target" in said.err
    assert "DIVERGES" not in said.out


def test_a_count_budget_explores_the_same_traces_whatever_the_clock() -> None:
    target = load_target(None)
    runs = []
    for _ in range(2):
        reach = verify.Reach()
        found, tried = verify.explore(target, "strict", 3600.0, seed=7, reach=reach, max_traces=400)
        assert found is None
        runs.append((tried, reach.ops_run, reach.slots, reach.keys, reach.pins, reach.key_list))
    assert runs[0] == runs[1] and runs[0][0] >= 400


def test_the_small_scope_completes_without_a_clock() -> None:
    found, scope = verify.exhaust(load_target(None), "strict")
    assert found is None and scope.complete


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__]))


FLIP = """
import auxstore


class BlockObjectStore(auxstore.BlockObjectStore):
    def get_concatenated(self, keys):
        data = bytearray(super().get_concatenated(keys))
        if len(data) > 8192:
            data[len(data) - self.object_nbytes + 4000] ^= 0xFF
        return bytes(data)
"""


def test_the_headline_names_the_op_and_where_a_read_first_differs(tmp_path: Path) -> None:
    port = tmp_path / "flip.py"
    port.write_text(FLIP)
    size = 8192
    trace = Trace(
        "strict",
        4 * size,
        size,
        (
            Put((("a", bytes(range(256)) * 32),)),
            Put((("b", bytes(i * 7 % 256 for i in range(size))),)),
            Get(("a", "b")),
        ),
    )
    divergence = compare(trace, load_target(str(port)))
    assert divergence is not None
    head = report.headline(divergence, "a test")
    assert head.startswith("DIVERGES (found by a test): step 3, get_concatenated(['a', 'b']): ")
    assert head.endswith("expected 16384 bytes, got 16384, first differing at offset 12192")
    assert len(head) <= report.WIDTH


@pytest.mark.slow  # two whole verify runs (each with the small scope); the fast version: the explore-level test above
@pytest.mark.timeout(600)
def test_the_same_seed_and_count_give_the_same_run(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    runs = []
    for _ in range(2):
        argv = ["verify", "--max-traces", "200", "--seed", "3", "--json", "--large-stores", "off"]
        assert cli.main(argv) == 0
        got = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        scope = {k: v for k, v in got["scope"].items() if k != "phases"}
        counts = {name: (p["traces"], p["ops"]) for name, p in got["scope"]["phases"].items()}
        runs.append((got["explored"], got["background_explored"], scope, counts, got["budgets"]))
    assert runs[0] == runs[1]
    assert runs[0][4] == {"vectors": "complete", "exhaustive": "complete", "background": "count", "random": "count"}


def test_a_background_report_shows_a_read_by_its_length_not_its_bytes() -> None:
    from auxspec.drivers.gated import _show
    from auxspec.models.sequential import Ok

    shown = _show(Ok(bytes(range(256)) * 96))
    assert shown.startswith("ok 24576 bytes") and len(shown) < 60, shown


def test_a_wrapped_command_runs_as_printed_even_with_a_long_quoted_word() -> None:
    long_word = "a quoted word " * 12
    words = ["printf", shlex.quote("%s|"), shlex.quote(long_word), "next"]
    lines = report.wrapped("run:", words, width=40)
    assert len(lines) > 1 and all(line.endswith(" \\") for line in lines[:-1])
    printed = "\n".join(lines).removeprefix("run:")
    ran = subprocess.run(["/bin/sh", "-c", printed], capture_output=True, text=True, check=True)
    assert ran.stdout == f"{long_word}|next|"


def test_the_documented_background_vector_reads(tmp_path: Path) -> None:
    doc = (ROOT / "docs" / "protocol.md").read_text()
    block = doc.split("### Background vectors", 1)[1].split("```json", 1)[1].split("```", 1)[0]
    path = tmp_path / "documented.jsonl"
    path.write_text(block.lstrip("\n"))
    scenario = vector_scenario(traces.load_background(path))
    assert scenario.max_pending_batches == 1 and [i for i, _ in scenario.faults] == [4]
    assert [type(step).__name__ for step in scenario.ops] == ["Put", "Release", "Get"]


KEY_IN_PORT = """
from auxspec.reference.store import ReferenceStore

class BlockObjectStore(ReferenceStore):
    def __contains__(self, key):
        return type(key) is str and super().__contains__(key)
"""


@pytest.mark.timeout(300)
def test_a_vector_that_cannot_hold_what_diverged_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    port = tmp_path / "in_false.py"  # `in` is False for a str subclass key: a plain-str file cannot show it
    port.write_text(KEY_IN_PORT)
    out = tmp_path / "found.jsonl"
    argv = ["verify", str(port), "--max-time", "10", "--seed", "1", "--large-stores", "off", "--out", str(out)]
    assert cli.main(argv) == 1
    printed = capsys.readouterr().out
    assert "KeyStr(" in printed and "note: the written vector does not diverge when replayed" in printed, printed
    assert compare(traces.load(out).trace, load_target(str(port))) is None


_CRASHING_PORT = """
import json, sys
from auxspec.drivers.protocol import serve
from auxspec.reference.store import ReferenceStore

class Lines:
    news = 0
    def readline(self, most):
        line = sys.stdin.buffer.readline(most)
        request = json.loads(line) if line.strip() else {}
        Lines.news += request.get("op") == "new"
        if CRASHES(request):
            sys.exit(7)
        return line

CRASHES = lambda request: %s
sys.exit(serve(lambda m, n: ReferenceStore(max_bytes=m, object_nbytes=n), Lines()))
"""


def _crashing_port(tmp_path: Path, crashes: str) -> str:
    script = tmp_path / "crashing_port.py"
    script.write_text(_CRASHING_PORT % crashes, encoding="utf-8")
    return shlex.join([sys.executable, str(script)])  # a checkout's path may hold spaces


def test_a_crashed_port_is_shrunk_in_fresh_processes(tmp_path: Path) -> None:
    """A port process that crashes on one call: its trace is shrunk, each
    candidate run in a process of its own, to that call alone; one that
    crashed for its own history (its second store) is kept as found."""
    command = _crashing_port(tmp_path, "request.get('op') == 'get' and len(request.get('keys', ())) >= 2")
    target, stop = verify.exec_target(command)
    padding = (Put((("a", b"\1\1"),)), Get(("a",)), Put((("b", b"\2\2"),), ("a",)), Put((), (), ("a",)))
    trace = Trace("strict", 6, 2, (*padding, Get(("b",)), Put((("c", b"\3\3"),)), Get(("c", "b")), Get(("a",))))
    try:
        found = compare(trace, target)
    finally:
        stop()
    assert found is not None and found.actual.startswith(verify.BROKE) and found.step == 6
    shrunk = verify.shrink_divergence(found, target, fresh=lambda: verify.exec_target(command))
    assert len(shrunk.value.ops) == 1 and shrunk.ended_by == "fixpoint", shrunk
    (only,) = shrunk.value.ops
    assert isinstance(only, Get) and len(only.keys) == 2  # type: ignore[arg-type]
    assert shrunk.failure.actual.startswith(verify.BROKE)
    # Without a fresh process (a Python target's caller), or when the port does not break on the trace
    # in a fresh one, the trace is kept as it was found.
    assert verify.shrink_divergence(found, target).ended_by == "skipped"
    second_store = _crashing_port(tmp_path, "Lines.news >= 2")
    kept = verify.shrink_divergence(found, target, fresh=lambda: verify.exec_target(second_store))
    assert kept.ended_by == "skipped" and kept.value.ops == trace.ops[:7] and kept.tries == 1


def test_the_shrinker_compresses_calls_the_spec_makes_equivalent() -> None:
    """A bug that needs 300 touches of one key before a stats() (a hit
    counter kept in 8 bits): the touches become one read that repeats the
    key, the puts of nothing and the other observations go, in few tries."""
    from auxspec.engine.ops import Len, Stats

    ops: list[object] = [Put((("a", b"\1"),))]
    for number in range(300):
        ops.append(Get(("a",)))
        if number % 10 == 0:
            ops.append(Put(()))
        if number % 7 == 0:
            ops.append(Len())
    trace = Trace("strict", 4, 1, (*ops, Stats()))  # type: ignore[arg-type]

    class Failure:
        def __init__(self, trace: Trace) -> None:
            self.step = len(trace.ops) - 1

    def fails(candidate: Trace) -> Failure | None:
        touches = sum(len(op.keys) for op in candidate.ops if isinstance(op, Get) and "a" in op.keys)  # type: ignore[arg-type]
        stored = any(isinstance(op, Put) and op.objects for op in candidate.ops)
        ends = bool(candidate.ops) and isinstance(candidate.ops[-1], Stats)
        return Failure(candidate) if touches >= 300 and stored and ends else None

    def cut(candidate: Trace, failure: Failure) -> Trace:
        return Trace(candidate.profile, candidate.max_bytes, candidate.object_nbytes, candidate.ops[: failure.step + 1])

    shrunk = shrink.shrink_trace(trace, Failure(trace), fails, cut)
    assert [type(op).__name__ for op in shrunk.value.ops] == ["Put", "Get", "Stats"], shrunk.value.ops
    assert shrunk.value.ops[1] == Get(("a",) * 300)
    assert shrunk.ended_by == "fixpoint" and shrunk.tries < 250, shrunk.tries


def test_a_deep_catch_is_shrunk_written_and_replayed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A counter that needs thousands of calls (stats().hits wrapping at
    2,048): the long trace is judged and written on the in-place spec, its
    commands carry the variables its size needs and run (reproduce and
    explain exit 1 on it), and the shrinker makes its touches one read."""
    from auxspec.engine.ops import Len, Stats

    port = tmp_path / "hits_11_bits.py"
    port.write_text(
        f"import sys\nsys.path.insert(0, {str(PORTS / 'depth')!r})\n"
        "from d_hits_in_16_bits import BlockObjectStore as Deep\n\n"
        "class BlockObjectStore(Deep):\n    WRAP = 2048\n"
    )
    target = load_target(str(port))
    ops: list[object] = [Put((("a", b"\1\2"),))]
    for number in range(2_100):  # no two neighbouring calls alike: the file has a line per call
        ops += [Get(("a",) * (1 + number % 2)), *([Len()] if number % 40 == 0 else [])]
    trace = Trace("strict", 8, 2, (*ops, Stats()))  # type: ignore[arg-type]
    assert verify.is_deep(trace)
    found = verify.judge_long(trace, target)
    assert found is not None and found.step == len(trace.ops) - 1
    out = tmp_path / "deep.jsonl"
    cli._write_shortest(found, out, "deep", "a test")
    assert len(traces.load(out).trace.ops) == len(trace.ops)
    monkeypatch.setattr(traces, "MAX_HELD_OPS", 1_000)  # as a vector of 100,000 calls is past the default
    commands = " ".join(cli._commands(argparse.Namespace(target=str(port), exec_command=None), out))
    assert f"{traces.OPS_VARIABLE}={len(trace.ops) + 1}" in commands
    assert cli.main(["reproduce", str(out), "--target", str(port)]) == 2  # past the limit without it
    capsys.readouterr()
    monkeypatch.setenv(traces.OPS_VARIABLE, str(len(trace.ops) + 1))
    assert cli.main(["reproduce", str(out), "--target", str(port)]) == 1
    assert "judged on the in-place spec" in capsys.readouterr().out
    assert cli.main(["explain", str(out), "--target", str(port)]) == 1
    shown = capsys.readouterr().out
    assert "too many to step through" in shown and "stats()" in shown
    shrunk = verify.shrink_divergence(found, target)
    assert [type(op).__name__ for op in shrunk.value.ops] == ["Put", "Get", "Stats"], shrunk.value.ops
    assert len(shrunk.value.ops[1].keys) >= 2_048  # type: ignore[attr-defined]


def test_the_shrinker_joins_only_calls_of_the_same_outcome() -> None:
    """A hit counter's bug needs 300 hits; between the hits, reads of a key
    never stored miss. A read that misses fails whole, so joined with the
    hits it takes them with it: given the spec's outcomes, the whole-trace
    join makes the hits one read and the misses another, in one try."""
    from auxspec.engine.ops import Stats

    ops: list[object] = [Put((("a", b"\1"),))]
    for number in range(300):
        ops += [Get(("a",)), *([Get(("gone",))] if number % 10 == 0 else [])]
    trace = Trace("strict", 4, 1, (*ops, Stats()))  # type: ignore[arg-type]

    def hits(candidate: Trace) -> int:
        reads = [op for op in candidate.ops if isinstance(op, Get)]
        return sum(len(op.keys) for op in reads if "gone" not in op.keys)  # type: ignore[arg-type]

    class Failure:
        def __init__(self, trace: Trace) -> None:
            self.step = len(trace.ops) - 1

    def fails(candidate: Trace) -> Failure | None:
        ends = bool(candidate.ops) and isinstance(candidate.ops[-1], Stats)
        return Failure(candidate) if hits(candidate) >= 300 and ends else None

    def cut(candidate: Trace, failure: Failure) -> Trace:
        return Trace(candidate.profile, candidate.max_bytes, candidate.object_nbytes, candidate.ops[: failure.step + 1])

    def outcomes(candidate: Trace) -> tuple[object, ...]:
        return tuple("missing" if isinstance(op, Get) and "gone" in op.keys else "ok" for op in candidate.ops)

    blind = shrink.shrink_trace(trace, Failure(trace), fails, cut, tries=20)
    # Without the outcomes, joining a miss with the hits fails; the run of reads is first made alike
    # instead (every read the last one, a hit: shrink._alike), which this verdict keeps, then joined.
    read = blind.value.ops[0]
    assert isinstance(read, Get) and set(read.keys) == {"a"} and len(blind.value.ops) == 2, blind.value.ops
    shrunk = shrink.shrink_trace(trace, Failure(trace), fails, cut, tries=20, outcomes=outcomes)
    assert [type(op).__name__ for op in shrunk.value.ops] == ["Get", "Stats"], shrunk.value.ops
    assert shrunk.value.ops[0] == Get(("a",) * 300), shrunk  # within the 20 tries
