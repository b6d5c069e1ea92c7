"""Pipelining through --exec (docs/protocol.md, "Pipelining: the batch
capability"): a port that declares ``batch`` is sent each trace's calls in
messages and judged exactly as one that is not; an answer dropped or given
twice in a message, and a crash in mid-message, are named at their op."""

from __future__ import annotations

import io
import json
import random
import shlex
import sys
import textwrap
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from auxspec.drivers import protocol
from auxspec.drivers.protocol import ProcessTarget, offer_of, process_target, schema, serve
from auxspec.engine.codec import decode
from auxspec.engine.compare import Divergence, compare
from auxspec.engine.ops import Close, Get, Put, Trace
from auxspec.engine.target import load_target

PY = shlex.quote(sys.executable)

# A port: auxspec serve over the bundled store, its lines logged ("message N"
# or "single"), and its answers to messages bent by MODE (argv[1]): drop,
# double or (wrong) answer b"" to a get of ["x"]; crash (exit 5) on a get of ["boom"].
PORT = """
import io, json, os, sys
from auxspec.drivers.protocol import Offer, offer_of, serve
from auxspec.engine.target import load_target

MODE, LOG = sys.argv[1], open(sys.argv[2], "a")
target = load_target(sys.argv[3] if len(sys.argv) > 3 else None)
offer = offer_of(target)
if MODE == "no-batch":
    offer = Offer(offer.capabilities - {"batch"}, offer.observe)
last = []

def marked(requests, key):
    return next((i for i, r in enumerate(requests) if r.get("op") == "get" and r.get("keys") == [key]), None)

class In:
    def readline(self, limit=-1):
        line = sys.stdin.buffer.readline(limit)
        if line.strip():
            parsed = json.loads(line)
            last[:] = parsed if isinstance(parsed, list) else [parsed]
            LOG.write(f"message {len(parsed)}\\n" if isinstance(parsed, list) else "single\\n")
            LOG.flush()
            if MODE == "crash" and marked(last, "boom") is not None:
                os._exit(5)
        return line

class Out(io.TextIOBase):
    def write(self, text):
        if text.startswith("[") and MODE in ("drop", "double", "wrong"):
            answers = json.loads(text)
            at = marked(last, "x")
            if at is not None:
                if MODE == "drop":
                    del answers[at]
                elif MODE == "double":
                    answers.insert(at, answers[at])
                else:
                    answers[at] = {"id": answers[at]["id"], "ok": ""}
            text = json.dumps(answers) + "\\n"
        sys.stdout.write(text)
        return len(text)

    def flush(self):
        sys.stdout.flush()

sys.exit(serve(target.factory, In(), Out(), offer=offer))
"""


@pytest.fixture
def port(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    script = tmp_path / "port.py"
    script.write_text(textwrap.dedent(PORT))
    yield script, tmp_path / "lines.log"


def _start(port: tuple[Path, Path], mode: str, served: Path | None = None) -> ProcessTarget:
    script, log = port
    what = f" {shlex.quote(str(served))}" if served is not None else ""
    return process_target(f"{PY} {shlex.quote(str(script))} {mode} {shlex.quote(str(log))}{what}", op_timeout=5)


def _lines(port: tuple[Path, Path]) -> list[str]:
    return port[1].read_text().splitlines()


def _traces(count: int, features: frozenset[str], longest: int = 120) -> list[Trace]:
    rng = random.Random(7)
    return [decode(rng.randbytes(rng.randint(8, longest)), "strict", features) for _ in range(count)]


AX = (("a", b"\x01\x01"),)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", ["good", "no-batch"])
def test_a_pipelining_port_and_one_that_does_not_are_judged_alike(port: tuple[Path, Path], mode: str) -> None:
    made = _start(port, mode)
    try:
        assert ("batch" in made.handshake.capabilities) == (mode == "good")
        found = [compare(trace, made.target) for trace in _traces(150, made.target.features)]
    finally:
        made.close()
    assert found == [None] * len(found)
    lines = _lines(port)
    messages = [line for line in lines if line.startswith("message")]
    if mode == "good":  # a message per trace built (its new, ops, snapshots and close)
        assert len(messages) >= 100, lines[:20]
        assert max(int(line.split()[1]) for line in messages) > 10
    else:
        assert messages == []


def _diverge(port: tuple[Path, Path], mode: str, trace: Trace) -> Divergence:
    made = _start(port, mode)
    try:
        found = compare(trace, made.target)
    finally:
        made.close()
    assert found is not None
    return found


def test_an_answer_left_out_of_a_message_is_named_at_its_op(port: tuple[Path, Path]) -> None:
    trace = Trace("strict", 4, 2, (Put(AX), Get(("a",)), Get(("x",)), Get(("a",))))
    found = _diverge(port, "drop", trace)
    assert found.step == 2, found.render()  # get(['x']): its place holds the snapshot's answer
    assert "the port broke" in found.actual and "wrong id" in found.actual, found.actual


def test_an_answer_given_twice_in_a_message_is_named_at_its_op(port: tuple[Path, Path]) -> None:
    trace = Trace("strict", 4, 2, (Put(AX), Get(("a",)), Get(("x",)), Get(("a",))))
    found = _diverge(port, "double", trace)
    assert found.step == 2, found.render()  # the snapshot after get(['x']) finds get's answer again
    assert "the port broke on snapshot" in found.actual and "wrong id" in found.actual, found.actual


@pytest.mark.parametrize("most", [protocol.MAX_BATCH, 4])
def test_a_crash_in_mid_message_is_named_at_its_op(
    port: tuple[Path, Path], most: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # most=4: messages of at most 4 requests, so the crash is in the third
    # message and the calls already answered are replayed to a new process.
    monkeypatch.setattr(protocol, "MAX_BATCH", most)
    ops = (Put(AX), Get(("a",)), Put((("b", b"\x02\x02"),)), Get(("boom",)), Get(("a",)))
    found = _diverge(port, "crash", Trace("strict", 8, 2, ops))
    assert found.step == 3, found.render()
    assert "the port broke" in found.actual and "exited" in found.actual, found.actual
    lines = _lines(port)
    # The lost message, then the new process: handshake, then one request a line from new on.
    lost = max(i for i, line in enumerate(lines) if line.startswith("message"))
    assert lines[lost + 1 :] == ["single"] * len(lines[lost + 1 :]) and len(lines[lost + 1 :]) >= 2 + 3, lines


def test_the_documented_message_is_what_serve_answers() -> None:
    doc = (Path(__file__).parents[1] / "docs" / "protocol.md").read_text()
    section = doc.split("## Pipelining: the `batch` capability", 1)[1].split("```text", 1)[1].split("```", 1)[0]
    sent = [line[2:] for line in section.splitlines() if line.startswith("> ")]
    answered = [json.loads(line[2:]) for line in section.splitlines() if line.startswith("< ")]
    target = load_target("auxspec:ReferenceStore")
    out = io.StringIO()
    hello = '{"id": 1, "op": "hello", "protocol": 2}\n'
    assert serve(target.factory, io.StringIO(hello + "\n".join(sent) + "\n"), out, offer=offer_of(target)) == 0
    got = [json.loads(line) for line in out.getvalue().splitlines()[1:]]
    validator = jsonschema.Draft202012Validator(schema())
    for request, answer in zip(sent, got, strict=True):
        validator.validate(json.loads(request))
        validator.validate(answer)
    assert [_without_messages(g) for g in got] == [_without_messages(a) for a in answered]


def _without_messages(answers: list[dict[str, object]]) -> list[dict[str, object]]:
    return [{k: v for k, v in a.items() if k != "message"} for a in answers]


@pytest.mark.parametrize(
    "line",
    [
        "[]",  # no request
        "[" + ", ".join(f'{{"id": {i}, "op": "close"}}' for i in range(2, 2 + protocol.MAX_BATCH + 1)) + "]",
        '[{"id": 2, "op": "hello", "protocol": 2}]',  # the handshake is a line of its own
        '[{"op": "new", "max_bytes": 4, "object_nbytes": 2}]',  # no id
    ],
    ids=["empty", "too many", "hello", "no id"],
)
def test_serve_refuses_a_message_that_is_not_the_protocol(line: str) -> None:
    target = load_target(None)
    hello = '{"id": 1, "op": "hello", "protocol": 2}\n'
    new = '{"id": 2, "op": "new", "max_bytes": 4, "object_nbytes": 2}\n'
    assert (
        serve(target.factory, io.StringIO(hello + new + line + "\n"), io.StringIO(), io.StringIO(), offer_of(target))
        == 3
    )
    # ... and a port that did not declare batch refuses any message.
    no_batch = protocol.Offer(offer_of(target).capabilities - {"batch"}, target.observe)
    good = '[{"id": 3, "op": "close"}]'
    assert serve(target.factory, io.StringIO(hello + new + good + "\n"), io.StringIO(), io.StringIO(), no_batch) == 3


def test_a_wrong_answer_in_a_message_leaves_the_port_in_step(port: tuple[Path, Path]) -> None:
    # The trace stops at the wrong answer; the rest of its message's answers
    # are read and dropped, so the same process serves the next trace.
    made = _start(port, "wrong")
    try:
        found = compare(Trace("strict", 4, 2, (Put(AX), Get(("x",)), Get(("a",)), Get(("a",)))), made.target)
        assert found is not None and found.step == 1, found
        assert "missing" in found.expected and "ok" in found.actual, found.render()
        again = compare(Trace("strict", 4, 2, (Put(AX), Get(("a",)), Get(("a",)))), made.target)
        assert again is None, again.render()
    finally:
        made.close()
    lines = _lines(port)
    assert lines == ["single", "message 10", "single", "message 8"], lines  # no second handshake


SUBTLE = Path(__file__).parent / "ports" / "subtle"


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", ["a_slot_index_3_bits", "c_count_in_3_bits", "g_keys_stripped"])
def test_pipelining_hides_no_catch_of_a_subtle_port(port: tuple[Path, Path], name: str) -> None:
    # A subtle buggy port (tests/ports/subtle) in this process picks out the
    # traces that catch it, and 20 that do not; served with and without
    # batch, the same of those diverge, at the same step, with the same outcomes.
    served = SUBTLE / f"{name}.py"
    found: dict[str, list[tuple[int, int, object, object]]] = {}
    for mode in ("good", "no-batch"):
        made = _start(port, mode, served)
        try:
            assert ("batch" in made.handshake.capabilities) == (mode == "good")
            if not found:
                here = replace(load_target(str(served)), features=made.target.features)
                traces = _traces(300, made.target.features, 200)
                caught = [(i, compare(trace, here)) for i, trace in enumerate(traces)]
                found["in-process"] = [(i, d.step, d.want, d.got) for i, d in caught if d is not None]
                chosen = [i for i, d in caught if d is not None] + [i for i, d in caught if d is None][:20]
            seen = [(i, compare(traces[i], made.target)) for i in sorted(chosen)]
            found[mode] = [(i, d.step, d.want, d.got) for i, d in seen if d is not None]
        finally:
            made.close()
    assert found["in-process"], f"{name}: no trace of these catches it, so the test shows nothing"
    assert found["good"] == found["no-batch"] == found["in-process"]


def test_a_divergence_just_before_a_close_op_leaves_the_port_in_step(port: tuple[Path, Path]) -> None:
    # The wrong answer is judged after its snapshot, when the trace's own
    # close is the next request sent ahead: the rest of the message is still
    # dropped, and the next trace's new meets no answer of this one.
    made = _start(port, "wrong")
    try:
        wrong = Trace("strict", 4, 2, (Put(AX), Get(("x",)), Close(), Get(("a",)), Put(AX)))
        found = compare(wrong, made.target)
        assert found is not None and found.step == 1, found
        again = compare(Trace("strict", 4, 2, (Put(AX), Get(("a",)), Close(), Get(("a",)))), made.target)
        assert again is None, again.render()
    finally:
        made.close()


def _sent_early(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Records, for each store built with a plan, whether that plan was sent before the store was built."""
    early: list[bool] = []
    built = protocol.ProcessStore.__init__

    def init(
        self: protocol.ProcessStore, port: Any, max_bytes: Any, object_nbytes: Any, plan: Any = None, *rest: Any
    ) -> None:
        if plan is not None:
            early.append(plan.new is not None)
        built(self, port, max_bytes, object_nbytes, plan, *rest)

    monkeypatch.setattr(protocol.ProcessStore, "__init__", init)
    return early


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    ("name", "every"), [("a_slot_index_3_bits", 1), ("c_count_in_3_bits", 1), ("c_count_in_3_bits", 3)]
)
def test_the_next_trace_sent_early_is_judged_as_alone(
    port: tuple[Path, Path], name: str, every: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # verify's search names the trace it compares next (Target.upcoming): a
    # pipelining port is sent it while the current one is judged. On a
    # subtle buggy port, every trace diverges or not, at the same step with
    # the same outcomes, as in this process; divergent traces, spec-refused
    # stores and traces with close ops among them drop what was sent early.
    # every=3: the state observed after every third op only (as the small
    # scope observes it after the last).
    served = SUBTLE / f"{name}.py"
    here = load_target(str(served))
    early = _sent_early(monkeypatch)
    made = _start(port, "good", served)
    try:
        here = replace(here, features=made.target.features)
        traces = _traces(200, made.target.features, 200)
        assert made.target.upcoming is not None
        got = []
        for i, trace in enumerate(traces):
            made.target.upcoming(traces[i + 1] if i + 1 < len(traces) else None, every)
            got.append(compare(trace, made.target, every=every))
    finally:
        made.close()
    want = [compare(trace, here, every=every) for trace in traces]
    shown = [(d.step, d.want, d.got) if d is not None else None for d in want]
    assert [(d.step, d.want, d.got) if d is not None else None for d in got] == shown
    assert any(d is not None for d in want), f"{name}: no trace of these catches it, so the test shows nothing"
    assert any(d is None for d in want)
    assert sum(early) >= len(traces) // 2, early  # most traces were sent while the one before was judged
    assert any(isinstance(op, Close) for trace in traces for op in trace.ops)


def test_a_port_that_exits_on_the_trace_sent_early_is_started_again(port: tuple[Path, Path]) -> None:
    # The port reads the next trace's early message and exits on it before
    # that trace's compare starts: the trace is sent again, from its new, to
    # a new process, and the exit is reported at its op.
    made = _start(port, "crash")
    try:
        # Longer than a first message (64 requests), so part of it is still to send.
        second = Trace("strict", 8, 2, (Put(AX), Get(("boom",)), *[Get(("a",))] * 40))
        made.target.upcoming(second)
        assert compare(Trace("strict", 8, 2, (Put(AX), Get(("a",)))), made.target) is None
        deadline = time.monotonic() + 10
        while made.ports.port.alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not made.ports.port.alive()
        found = compare(second, made.target)
    finally:
        made.close()
    assert found is not None and found.step == 1, found
    assert "the port broke" in found.actual and "exited" in found.actual, found.actual
