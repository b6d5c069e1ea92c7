"""A call made N times in a row (issue 28 point 6, issue 36 point 4): one
line with ``"times": N`` in a trace file (format 4), read by the one trace
reader, refused as a typed error when malformed or past its bound, replayed
as N calls; the shrinker makes neighbouring calls alike so a bug that needs
N calls is reported in a few entries."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from auxspec.drivers import shrink, verify
from auxspec.engine import traces
from auxspec.engine.compare import compare
from auxspec.engine.expect import expected_outcomes
from auxspec.engine.ops import Get, Op, Put, Stats, Trace, runs
from auxspec.engine.target import Target, load_target
from auxspec.engine.traces import TraceError
from auxspec.generators.background import Release

HEADER = {
    "format": "auxspec-trace",
    "version": 4,
    "name": "t",
    "description": "",
    "profile": "strict",
    "max_bytes": 4,
    "object_nbytes": 2,
    "expect_new": {"ok": None},
}
PUT_A = {"op": "put", "objects": [["a", "0102"]], "retain": [], "release": [], "expect": {"ok": None}}
READ_A = {"op": "get", "keys": ["a"], "expect": {"ok": "0102"}}


def _file(*lines: dict[str, Any], version: int = 4) -> str:
    return "\n".join(json.dumps(line) for line in ({**HEADER, "version": version}, *lines)) + "\n"


def test_a_line_with_times_is_that_many_calls_and_is_written_back_as_one_line() -> None:
    vector = traces.loads(_file({**PUT_A, "times": 3}, {**READ_A, "times": 2}))
    put, read = Put((("a", b"\x01\x02"),)), Get(("a",))
    assert vector.trace.ops == (put, put, put, read, read)
    assert traces.entry_count(vector) == 2
    again = traces.dumps(vector)
    assert json.loads(again.splitlines()[0])["version"] == traces.REPEAT_VERSION
    assert [json.loads(line).get("times") for line in again.splitlines()[1:]] == [3, 2]
    assert traces.loads(again) == vector


def test_a_file_without_repeats_is_written_as_before() -> None:
    trace = Trace("strict", 4, 2, (Put((("a", b"\x01\x02"),)), Get(("a",)), Put((("a", b"\x01\x02"),))))
    text = traces.dumps(traces.vector_from_trace(trace, "t"))
    assert json.loads(text.splitlines()[0])["version"] == 1 and '"times"' not in text
    # The same call with different outcomes is not one entry: each line keeps its own expectation.
    twice = Trace("strict", 2, 2, (Put((("a", b"\x01\x02"),)), Get(("a",)), Get(("b",)), Get(("b",))))
    lines = traces.dumps(traces.vector_from_trace(twice, "t")).splitlines()[1:]
    assert [json.loads(line).get("times") for line in lines] == [None, None, 2]


@pytest.mark.parametrize(
    ("times", "words"),
    [
        (0, "times is a whole number of calls, 1 or more, got 0"),
        (-2, "got -2"),
        (2.0, "got 2.0"),
        (True, "got True"),
        ("3", "got '3'"),
        (None, "got None"),
        (10**40, "more than 4194304 calls"),
    ],
)
def test_a_bad_times_is_refused_naming_the_line(times: object, words: str) -> None:
    with pytest.raises(TraceError, match=rf"^vec\.jsonl:3: .*{words}"):
        traces.loads(_file(PUT_A, {**READ_A, "times": times}), "vec.jsonl")


def test_times_needs_format_4() -> None:
    with pytest.raises(TraceError, match=r'^vec\.jsonl:2: "times" needs format version 4'):
        traces.loads(_file({**PUT_A, "times": 2}, version=3), "vec.jsonl")


def test_the_calls_a_file_makes_are_bounded_before_any_is_made(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(traces.EXPANDED_OPS_VARIABLE, "10")
    text = _file({**PUT_A, "times": 6}, {**READ_A, "times": 4})
    assert len(traces.loads(text).trace.ops) == 10
    path = tmp_path / "many.jsonl"
    path.write_text(_file({**PUT_A, "times": 6}, {**READ_A, "times": 4}, READ_A))
    with pytest.raises(TraceError, match=rf"many\.jsonl:4: .*more than 10 calls .*{traces.EXPANDED_OPS_VARIABLE}"):
        traces.load(path)
    # The streamed reader (verify --vectors, vectors --check) stops at the same line, before replaying anything.
    with pytest.raises(TraceError, match=r"many\.jsonl:4: "):
        traces.survey(path)
    monkeypatch.setenv(traces.EXPANDED_OPS_VARIABLE, "x")
    with pytest.raises(TraceError, match=traces.EXPANDED_OPS_VARIABLE):
        traces.loads(text)


def test_a_huge_times_is_refused_at_once(tmp_path: Path) -> None:
    path = tmp_path / "huge.jsonl"
    path.write_text(_file({**PUT_A, "times": 10**18}))
    with pytest.raises(TraceError, match="more than"):
        traces.survey(path)  # a check, not a loop of 10**18 steps or a list of them


def _thirtieth_put_target() -> Target:
    """A store whose 30th put call loses everything stored: built on the reference store."""
    from auxspec.reference.store import ReferenceStore

    class Forgetful(ReferenceStore):
        def __init__(self, **sizes: Any) -> None:
            super().__init__(profile="strict", **sizes)
            self.puts = 0
            self.sizes = sizes

        def put(self, objects: Any, *, retain_keys: Any = (), release_keys: Any = ()) -> None:
            self.puts += 1
            super().put(objects, retain_keys=retain_keys, release_keys=release_keys)
            if self.puts == 30:  # the bug: the 30th put leaves an empty store
                ReferenceStore.__init__(self, profile="strict", **self.sizes)
                self.puts = 30

    bundled = load_target(None)
    return Target("Forgetful", lambda m, n: Forgetful(max_bytes=m, object_nbytes=n), bundled.observe)


def test_replaying_a_repeated_line_is_replaying_the_calls_it_stands_for(tmp_path: Path) -> None:
    put, read = Put((("a", b"\x01\x02"),)), Get(("a",))
    expanded = Trace("strict", 4, 2, (*[put] * 30, read, Stats()))
    path = tmp_path / "repeated.jsonl"
    traces.write(traces.vector_from_trace(expanded, "repeated"), path)
    assert path.read_text().count("\n") == 4  # header, put × 30, get, stats
    loaded = traces.load(path)
    assert loaded.trace == expanded
    assert loaded.expected == tuple(outcome for outcome, _ in expected_outcomes(expanded))
    target = _thirtieth_put_target()
    through_file = verify.replay_file(traces.survey(path), target)
    in_memory = compare(expanded, target)
    assert through_file is not None and in_memory is not None
    assert (through_file.step, through_file.actual) == (in_memory.step, in_memory.actual)
    assert verify.replay_file(traces.survey(path), load_target(None)) is None


def _noisy_trace() -> Trace:
    """30 puts of distinct keys over a store of 4, reads between, then a read of the last key stored."""
    ops: list[Op] = []
    for number in range(30):
        ops.append(Put(((f"k{number}", bytes([number, 1])),)))
        if number % 7 == 3:
            ops.append(Get((f"k{number}",)))
    ops.append(Get(("k28",)))
    return Trace("strict", 8, 2, tuple(ops))


def test_a_bug_that_needs_30_puts_is_reported_in_at_most_3_entries() -> None:
    target = _thirtieth_put_target()
    found = compare(_noisy_trace(), target)
    assert found is not None
    shrunk = verify.shrink_divergence(found, target)
    ops = shrunk.value.ops
    assert sum(1 for op in ops if isinstance(op, Put)) >= 30  # the bug's 30 calls stay calls
    assert shrink.entry_count(ops) <= 3, [(op, n) for _, op, n in runs(ops)]
    written = traces.vector_from_trace(shrunk.value, "found")
    assert traces.entry_count(written) <= 3
    assert compare(traces.loads(traces.dumps(written)).trace, target) is not None


def test_a_background_vector_writes_a_repeated_owner_call_once(tmp_path: Path) -> None:
    put = Put((("a", b"\x01\x02"),))
    steps: tuple[Op | int, ...] = (put, put, put, 1, put, Get(("a",)))
    vector = traces.BackgroundVector("bg", "", "strict", 4, 2, 2, steps)
    text = traces.dumps_background(vector)
    header, *lines = (json.loads(line) for line in text.splitlines())
    assert header["version"] == traces.BACKGROUND_REPEAT_VERSION
    assert [line.get("times") for line in lines] == [3, None, None, None]  # a writer release breaks the run
    path = tmp_path / "bg.jsonl"
    path.write_text(text)
    assert traces.load_background(path).steps == steps
    assert shrink.owner_entries(tuple(Release(s) if isinstance(s, int) else s for s in steps)) == 3
    path.write_text(text.replace('"times": 3', '"times": 0'))
    with pytest.raises(TraceError, match=r"bg\.jsonl:2: times is a whole number"):
        traces.load_background(path)
    path.write_text(text.replace('"version": 2', '"version": 1'))
    with pytest.raises(TraceError, match=r'bg\.jsonl:2: "times" needs format version 2'):
        traces.load_background(path)
    plain = traces.BackgroundVector("bg", "", "strict", 4, 2, 2, (put, 1, put))
    assert json.loads(traces.dumps_background(plain).splitlines()[0])["version"] == traces.BACKGROUND_VERSION


def test_a_deep_counter_of_failed_puts_shrinks_to_a_few_entries(tmp_path: Path) -> None:
    """A counter of capacity failures that wraps (at 64 here, at 1,024 in
    tests/ports/depth): the failing puts are spread through a deep trace
    among reads that change the state; the shrinker rebuilds the state
    before the first failing put in one put and repeats that put, so the
    report is a few entries however long the life was."""
    from auxspec.engine.ops import Len

    port = tmp_path / "failures_6_bits.py"
    port.write_text(
        f"import sys\nsys.path.insert(0, {str(Path(__file__).parent / 'ports' / 'depth')!r})\n"
        "from d_capacity_failures_10_bits import BlockObjectStore as Deep\n\n"
        "class BlockObjectStore(Deep):\n    WRAP = 64\n"
    )
    target = load_target(str(port))
    ops: list[Op] = [Put((("a", b"\1\2"), ("b", b"\3\4")), ("a", "b"))]  # both slots pinned
    for number in range(1_100):
        ops += [Get(("a", "b")[number % 2 :]), Len()] if number % 11 else [Put(((f"n{number}", b"\5\6"),))]
    trace = Trace("strict", 4, 2, (*ops, Stats()))
    assert verify.is_deep(trace)
    found = verify.judge_long(trace, target)
    assert found is not None and found.step == len(trace.ops) - 1
    shrunk = verify.shrink_divergence(found, target)
    assert shrink.entry_count(shrunk.value.ops) <= 4, [(op, n) for _, op, n in runs(shrunk.value.ops)]
    failing = [op for op in shrunk.value.ops if isinstance(op, Put) and op.objects and not op.retain]
    assert len(failing) >= 64  # the counter still wraps: the calls are there, as one entry


def test_the_shrink_deadline_holds_inside_one_candidate(monkeypatch: pytest.MonkeyPatch) -> None:
    """One candidate of a deep trace may take longer than the whole budget:
    the replay stops at the deadline (engine.budget), not at the candidate's end.
    A clock that moves one second per call the port takes makes it exact."""
    from auxspec.engine import budget

    clock = [0.0]
    monkeypatch.setattr(budget.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(shrink.time, "monotonic", lambda: clock[0])
    inner = _thirtieth_put_target()
    calls_after = [0]

    def slow(m: Any, n: Any) -> Any:
        store = inner.factory(m, n)
        put = store.put

        def timed_put(*args: Any, **kwargs: Any) -> None:
            clock[0] += 1.0
            calls_after[0] += clock[0] > 100.0
            put(*args, **kwargs)

        store.put = timed_put
        return store

    target = Target("Slow", slow, inner.observe)
    ops = (*(Put(((f"k{n % 7}", bytes([n % 256, 1])),)) for n in range(1_000)), Get(("k0",)))
    found = compare(Trace("strict", 8, 2, ops), target)
    assert found is not None  # the 30th put forgets: k0 is missing at the end
    clock[0] = 0.0
    shrunk = shrink.shrink_trace(
        found.trace,
        found,
        lambda t: compare(t, target, every=len(t.ops) + 1, replay=False),
        lambda t, f: t,
        seconds=100.0,
    )
    assert shrunk.ended_by == "time"
    assert calls_after[0] <= budget.EVERY, calls_after[0]  # without the check: up to a candidate's 1,000


def test_a_candidate_costs_at_most_twice_the_trace_it_shrinks() -> None:
    """A class's first call repeated (or a run made its biggest call) would
    turn one read of 5,000 keys among single-key reads into 5,000 of them."""
    big = Get(tuple(f"k{n}" for n in range(5_000)))
    ops = (Put((("k0", b"\x00\x00"),)), big, *[Get(("k0",))] * 3_000, Stats())
    most = shrink.affordable(ops)
    assert shrink.work(ops) < most < shrink.work((big,) * 3_001)


def _put_number_port(folder: Path) -> Path:
    """tests/ports/depth's put-number port with an 11-bit number: it wraps after 2,048 puts."""
    port = folder / "put_number_11_bits.py"
    port.write_text(
        f"import sys\nsys.path.insert(0, {str(Path(__file__).parent / 'ports' / 'depth')!r})\n"
        "from d_put_number_16_bits import BlockObjectStore as Deep\n\n"
        "class BlockObjectStore(Deep):\n    MASK = 0x7FF\n"
    )
    return port


def _put_number_trace() -> Trace:
    """2,600 puts of new keys over a store of 8, reads between: past the wrap, and deep."""
    ops: list[Op] = []
    for number in range(2_600):
        ops.append(Put(((f"k{number}", bytes([number % 256, 1])),)))
        if number % 3 == 0:
            ops.append(Get((f"k{number - number % 6}",)))
    return Trace("strict", 16, 2, (*ops, Stats()))


def test_a_deep_counter_of_put_calls_shrinks_to_a_few_entries(tmp_path: Path) -> None:
    """A put number that wraps (at 2,048 here, at 65,536 in tests/ports/depth):
    only the number of put calls before the wrong eviction matters, and the
    reads between them change the state. The shrinker rebuilds the state
    before the last calls in one put after as many no-op puts as the trace
    made before it, so the report is a few entries however long the life was."""
    port = _put_number_port(tmp_path)
    target = load_target(str(port))
    trace = _put_number_trace()
    assert verify.is_deep(trace)
    found = verify.judge_long(trace, target)
    assert found is not None
    shrunk = verify.shrink_divergence(found, target, seconds=10.0)  # the count-keeping rebuild is among the first tries
    assert shrink.entry_count(shrunk.value.ops) <= 8, [(op, n) for _, op, n in runs(shrunk.value.ops)]
    assert sum(1 for op in shrunk.value.ops if isinstance(op, Put)) >= 2_048  # the number still wraps
    assert verify.judge_long(shrunk.value, load_target(None)) is None  # the spec's own store agrees with it


def test_a_deep_divergence_is_named_at_the_same_op_through_a_pipelining_port(tmp_path: Path) -> None:
    """The exact stretch before a deep trace's checkpoint asks for a snapshot
    after each of its ops: a port that takes its requests ahead (``batch``)
    must be sent them ahead too, or its answers fall out of step."""
    import shlex
    import sys

    port = _put_number_port(tmp_path)
    trace = _put_number_trace()
    in_process = verify.judge_long(trace, load_target(str(port)))
    serve = shlex.quote(str(Path(sys.executable).parent / "auxspec"))
    target, stop = verify.exec_target(f"{serve} serve {shlex.quote(str(port))}")
    try:
        assert target.ahead is not None  # serve pipelines
        through = verify.judge_long(trace, target)
    finally:
        stop()
    assert in_process is not None and through is not None
    assert (through.step, through.actual) == (in_process.step, in_process.actual)
    assert in_process.step % verify.LONG_EVERY != verify.LONG_EVERY - 1  # named at its op, not at a checkpoint
