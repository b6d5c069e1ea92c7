"""The C port (ports/c/auxport.c) against the spec, over the port protocol.

Built with make into a temporary folder. `auxspec verify --exec` replays the
bundled vectors and explores; a direct driver here also compares the port's
snapshot with the model's after every op, on random traces from the op
alphabet and on hand-made request shapes the decoder rarely or never makes
(odd keys, odd sizes, large payloads, validation order); malformed request
lines must end the port with status 3.
"""

from __future__ import annotations

import io
import json
import random
import select
import shlex
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from auxspec import cli
from auxspec.drivers import verify
from auxspec.drivers.protocol import process_target
from auxspec.engine.codec import decode
from auxspec.engine.compare import compare
from auxspec.engine.expect import expected_new, expected_outcomes
from auxspec.engine.ops import CORE, Close, Get, Op, Put, ReadInto, Trace
from auxspec.engine.table import trace_needs
from auxspec.engine.traces import op_to_json
from auxspec.engine.traces import outcome_to_json as outcome_json
from auxstore import StoreSnapshot

ROOT = Path(__file__).resolve().parents[1]
PORT_DIR = ROOT / "ports" / "c"
TIMEOUT = 10.0  # seconds for one answer; the port answers in microseconds


@pytest.fixture(scope="module")
def auxport(tmp_path_factory: pytest.TempPathFactory) -> Path:
    for tool in ("gcc", "make"):
        if shutil.which(tool) is None:
            pytest.skip(f"building the C port needs {tool}, which is not installed")
    build = tmp_path_factory.mktemp("auxport")
    done = subprocess.run(
        ["make", "-C", str(PORT_DIR), f"BUILD={build}"], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, f"make failed:\n{done.stdout}\n{done.stderr}"
    return build / "auxport"


class Port:
    """One running port process; one request line out, one answer line back."""

    def __init__(self, exe: Path) -> None:
        self.process = subprocess.Popen(
            [str(exe)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1
        )
        self.next_id = 1

    def send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def answer(self) -> str:
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], TIMEOUT)
        assert ready, "the port did not answer in time"
        return self.process.stdout.readline()

    def request(self, body: dict[str, Any]) -> dict[str, Any]:
        """The answer to ``body``, without its id (checked) and free-text message."""
        request_id = self.next_id
        self.next_id += 1
        self.send(json.dumps({"id": request_id, **body}))
        line = self.answer()
        reply = json.loads(line)
        assert isinstance(reply, dict), line
        assert reply.pop("id") == request_id, line
        reply.pop("message", None)
        return reply

    def finish(self) -> tuple[int, str]:
        """Close stdin; the exit status and what the port wrote to stderr."""
        assert self.process.stdin is not None and self.process.stderr is not None
        self.process.stdin.close()
        status = self.process.wait(timeout=TIMEOUT)
        return status, self.process.stderr.read()


@pytest.fixture
def port(auxport: Path) -> Iterator[Port]:
    running = Port(auxport)
    yield running
    if running.process.poll() is None:
        running.process.kill()
    running.process.wait()
    for pipe in (running.process.stdin, running.process.stdout, running.process.stderr):
        if pipe is not None:
            pipe.close()


def snapshot_json(snap: StoreSnapshot) -> dict[str, Any]:
    return {
        "entries": [[key, payload.hex()] for key, payload in snap.entries],
        "references": [[key, count] for key, count in snap.references],
        "closed": snap.closed,
    }


def diverges(port: Port, trace: Trace) -> str | None:
    """Run ``trace`` on the port; the first disagreement with the model, if
    any, in outcome or snapshot after each op."""
    got = port.request({"op": "new", "max_bytes": trace.max_bytes, "object_nbytes": trace.object_nbytes})
    want = outcome_json(expected_new(trace))
    if got != want:
        return f"new: port {got}, spec {want}"
    for step, (op, (outcome, snap)) in enumerate(zip(trace.ops, expected_outcomes(trace), strict=True), 1):
        got = port.request(op_to_json(op))
        if got != outcome_json(outcome):
            return f"step {step} {op}: port {got}, spec {outcome_json(outcome)}"
        seen = port.request({"op": "snapshot"})
        if seen != {"ok": snapshot_json(snap)}:
            return f"step {step} {op}: port snapshot {seen}, spec {snapshot_json(snap)}"
    return None


# ------------------------------------------------------------- verification


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_auxspec_verify_exec_conforms(auxport: Path, tmp_path: Path) -> None:
    command = shlex.quote(str(auxport))
    argv = ["verify", "--exec", command, "--max-time", "20", "--seed", "1", "--out", str(tmp_path / "div.jsonl")]
    assert cli.main(argv) == 0
    assert not (tmp_path / "div.jsonl").exists()


@pytest.mark.timeout(120)
def test_random_traces_match_the_model_with_snapshots(port: Port) -> None:
    rng = random.Random(20240601)
    for number in range(500):
        data = rng.randbytes(rng.randint(4, 200))
        found = diverges(port, decode(data, "strict", CORE))  # what a port process is given
        assert found is None, f"trace {number} (input {data.hex()}): {found}"
    assert port.finish()[0] == 0


@pytest.mark.timeout(60)
def test_bundled_vectors(port: Port) -> None:
    vectors = [
        v
        for v in verify.load_vectors([cli.BUNDLED_VECTORS])
        if v.trace.profile == "strict" and trace_needs(v.trace) <= CORE  # no observations, no Python forms
    ]
    assert len(vectors) >= 25, "the bundled strict vectors a port process runs"
    for vector in vectors:
        # The recorded expectations, not only the model's: a vector file is the conformance kit.
        assert port.request(
            {"op": "new", "max_bytes": vector.trace.max_bytes, "object_nbytes": vector.trace.object_nbytes}
        ) == outcome_json(vector.expected_new)
        for op, want in zip(vector.trace.ops, vector.expected, strict=True):
            assert port.request(op_to_json(op)) == outcome_json(want), f"{vector.name}: {op}"
        assert diverges(port, vector.trace) is None, vector.name


def test_the_documented_exchange(port: Port) -> None:
    doc = (ROOT / "docs" / "protocol.md").read_text()
    exchange = doc.split("## A full exchange", 1)[1].split("```text", 1)[1].split("```", 1)[0]
    sent = [line[2:] for line in exchange.splitlines() if line.startswith("> ")]
    answered = [json.loads(line[2:]) for line in exchange.splitlines() if line.startswith("< ")]
    assert sent and len(sent) == len(answered)
    # The C port speaks protocol 1: no handshake, and none of the observations.
    offered = {"new", "put", "get", "read_into", "close", "snapshot"}
    for line, want in zip(sent, answered, strict=True):
        if json.loads(line)["op"] not in offered:
            continue
        port.send(line)
        got = json.loads(port.answer())
        got.pop("message", None)
        want.pop("message", None)
        assert got == want, line


# --------------------------------------------------------- hand-made shapes

P2 = b"\x01\x02"  # a valid payload when object_nbytes is 2
ODD_KEYS = ("", "a", "é", "\ud800", "\udc00x", "\ue000", "\uffff", "😀", "\ud83dx", 'q"\\/', "\x00\x1f", "k" * 300)

SHAPES: dict[str, Trace] = {
    "sizes that are not ints": Trace("strict", 8, 2.5),
    "bool size": Trace("strict", True, 1),
    "null size": Trace("strict", None, 2),
    "string size": Trace("strict", "8", 2),
    "NaN size": Trace("strict", 8, float("nan")),
    "type before config": Trace("strict", 0, 2.0),
    "object size zero": Trace("strict", 8, 0),
    "object size negative": Trace("strict", 8, -1),
    "max below object size": Trace("strict", 1, 2),
    "negative max": Trace("strict", -4, 2),
    "huge sizes": Trace("strict", 10**30, 10**29, (Put((("a", b"\x00"),)), Get(("a",)))),
    "huge capacity": Trace(
        "strict", 10**30, 1, (*(Put(((f"k{i}", bytes([i])),)) for i in range(50)), Get(("k0", "k49")))
    ),
    "remainder of max_bytes": Trace("strict", 5, 2, (Put((("a", P2), ("b", P2))), Put((("c", P2),)), Get(("a",)))),
    "odd keys, sorted by code point": Trace(
        "strict",
        64,
        2,
        (
            Put(tuple((key, bytes([i, i])) for i, key in enumerate(ODD_KEYS)), ODD_KEYS[::-1], ODD_KEYS[:3]),
            Get(ODD_KEYS[::2]),
            Put((), ODD_KEYS[5:], ODD_KEYS[1:]),
            Close(),
        ),
    ),
    "validation order: first object's length before second's key": Trace(
        "strict", 8, 2, (Put((("a", b"\x00"), (1, P2))), Put(((1, b"\x00"),)), Put((("a", None),)))
    ),
    "validation order: objects before pins": Trace(
        "strict",
        8,
        2,
        (
            Put((("a", P2),), ("a",)),
            Put((("b", P2), ("c", b"\x00")), (1,)),
            Put((("b", P2),), (1,)),
            Put((("b", P2),), ("b",), (1,)),
            Put((), (), ("zz", 1)),  # an invalid key wins over the over-release before it
            Put((("b", None),), (), ("zz",)),
        ),
    ),
    "over-release changes nothing": Trace(
        "strict",
        4,
        2,
        (
            Put((("a", P2),), ("a",)),
            Put((("b", P2),), ("b", "a"), ("a", "a")),
            Put((), ("x",), ("x", "x")),
            Put((), (), ("a",)),
            Put((), (), ("a",)),
        ),
    ),
    "capacity failure changes nothing": Trace(
        "strict",
        4,
        2,
        (
            Put((("a", P2), ("b", P2)), ("a", "b")),
            Put((("c", P2),), ("c",), ("a",)),
            Put((("c", P2), ("d", P2), ("e", P2))),
            Put((("c", P2),), (), ("a",)),
            Get(("b", "c")),
        ),
    ),
    "terminal batch key evicted at once": Trace(
        "strict", 2, 2, (Put((), ("a",)), Put((("b", P2),), ("b",)), Put((("a", P2),), (), ("a",)), Get(("b",)))
    ),
    "reads": Trace(
        "strict",
        6,
        2,
        (
            Put((("a", P2), ("b", b"\x03\x04"))),
            Get(()),
            ReadInto((), 0),
            ReadInto(("zz",), 0, readonly=True),  # type before missing
            ReadInto(("a", 1), 100),
            ReadInto(("zz", "a"), 0),  # missing before buffer
            ReadInto(("a", "b"), 3),
            ReadInto(("b", "a", "b"), 6),
            Get(("a", "a", "b")),
            ReadInto(("a",), 1 << 20),
        ),
    ),
    "after close": Trace(
        "strict",
        4,
        2,
        (
            Put((("a", P2),), ("a",)),
            Close(),
            Put(((1, None),), (1,)),
            ReadInto((1,), 0, readonly=True),
            Get(("a",)),
            Close(),
            Close(),
        ),
    ),
    "64 KiB objects, long keys": Trace(
        "strict",
        3 * 65536,
        65536,
        (
            *(Put(((f"{'x' * 250}{i}", bytes([i]) * 65536),), (f"p{i}",) * (i % 2)) for i in range(5)),
            ReadInto(("x" * 250 + "4", "x" * 250 + "3"), 2 * 65536),
            Get(("x" * 250 + "0",)),
        ),
    ),
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", list(SHAPES))
def test_hand_made_shapes_match_the_model(port: Port, name: str) -> None:
    assert diverges(port, SHAPES[name]) is None


def test_a_fresh_new_drops_the_old_store(port: Port) -> None:
    ops: tuple[Op, ...] = (Put((("a", P2),), ("a",)), Close())
    for trace in (Trace("strict", 4, 2, ops), Trace("strict", 4, 2, (Get(("a",)),)), Trace("strict", 4, 1, ops[:1])):
        assert diverges(port, trace) is None
    assert port.request({"op": "new", "max_bytes": 4, "object_nbytes": 0}) == {"error": "config"}
    # Blank lines are skipped, as auxspec serve does; end of input ends the port cleanly.
    port.send("   ")
    assert port.finish() == (0, "")


RAW_LINES = [
    '{"id": 1, "op": "new", "max_bytes": 6, "object_nbytes": 2}',
    '{"id": 2, "op": "put", "objects": [["a", " 0A 0b "], ["\\u00e9\\ud83d\\ude00", "FFff"]], "retain": ["\\ud800"]}',
    '{"id": 3, "op": "get", "keys": ["a"], "keys": ["\\u00e9\\ud83d\\ude00", "a"]}',  # the last member wins
    '{"op": "get", "id": -0, "keys": ["a"]}',
    '{"id": 5, "op": "read_into", "keys": ["a"], "buffer": 2}',
    ' \t{"id": 6, "op": "put", "objects": [], "retain": [], "release": ["\\ud800"]}\r',
    '{"id": 7, "op": "snapshot"}',
    '{"id": 7, "op": "new", "max_bytes": 6, "object_nbytes": 1E0}',
    '{"id": 8, "op": "new", "max_bytes": 6, "object_nbytes": -0}',
    '{"id": 9, "op": "new", "max_bytes": 00.5e1, "object_nbytes": 1}',
]


def test_raw_lines_answer_as_auxspec_serve(auxport: Path) -> None:
    from auxspec.drivers.protocol import serve
    from auxspec.reference.store import ReferenceStore

    valid = RAW_LINES[:-1]  # the last is not JSON (leading zeros): both must stop with 3
    reference = io.StringIO()
    status = serve(
        lambda m, n: ReferenceStore(max_bytes=m, object_nbytes=n), io.StringIO("\n".join(RAW_LINES)), reference
    )
    done = subprocess.run([str(auxport)], input="\n".join(RAW_LINES), capture_output=True, text=True, timeout=TIMEOUT)
    assert (status, done.returncode) == (3, 3)

    def answers(text: str) -> list[dict[str, Any]]:
        return [{k: v for k, v in json.loads(line).items() if k != "message"} for line in text.splitlines()]

    assert len(answers(done.stdout)) == len(valid)
    assert answers(done.stdout) == answers(reference.getvalue())


def test_a_buffer_beyond_any_memory_is_large_enough(port: Port) -> None:
    # The spec cannot allocate it; the port only compares sizes, saturating.
    assert port.request({"op": "new", "max_bytes": 4, "object_nbytes": 2}) == {"ok": None}
    assert port.request({"op": "put", "objects": [["a", "0a0b"]]}) == {"ok": None}
    huge = {"op": "read_into", "keys": ["a", "a"], "buffer": 10**40, "readonly": False}
    assert port.request(huge) == {"ok": "0a0b0a0b"}
    assert port.request({**huge, "readonly": True}) == {"error": "type"}


# ------------------------------------------------------------ not the protocol

NEW = '{"id": 1, "op": "new", "max_bytes": 4, "object_nbytes": 2}'
MALFORMED = [
    "not json",
    NEW[:-1] + "} x",
    "[1]",
    '{"op": "close"}',
    '{"id": "2", "op": "close"}',
    '{"id": 2.5, "op": "close"}',
    '{"id": 2}',
    '{"id": 2, "op": "frobnicate"}',
    '{"id": 2, "op": "get"}',
    '{"id": 2, "op": "get", "keys": "a"}',
    '{"id": 2, "op": "get", "keys": [1.5]}',
    '{"id": 2, "op": "get", "keys": [null]}',
    '{"id": 2, "op": "get", "keys": ["a\tb"]}',  # a raw control character in a string
    '{"id": 2, "op": "get", "keys": ["\\x"]}',
    '{"id": 2, "op": "put", "objects": [["a", "zz"]]}',
    '{"id": 2, "op": "put", "objects": [["a", "0 1"]]}',
    '{"id": 2, "op": "put", "objects": [["a"]]}',
    '{"id": 2, "op": "put", "objects": [["a", 5]]}',
    '{"id": 2, "op": "put", "objects": {}}',
    '{"id": 2, "op": "put", "retain": null}',
    '{"id": 2, "op": "read_into", "keys": [], "buffer": -1}',
    '{"id": 2, "op": "read_into", "keys": [], "buffer": 1.0}',
    '{"id": 2, "op": "read_into", "keys": [], "buffer": 4, "readonly": 1}',
    '{"id": 2, "op": "read_into", "keys": []}',
    "[" * 100_000,
]


@pytest.mark.parametrize("line", MALFORMED, ids=range(len(MALFORMED)))
def test_a_malformed_request_ends_the_port_with_status_3(port: Port, line: str) -> None:
    port.send(NEW)
    assert json.loads(port.answer()) == {"id": 1, "ok": None}
    port.send(line)
    status, stderr = port.finish()
    assert status == 3
    assert "auxport: request line 2" in stderr


@pytest.mark.parametrize(
    "first", ['{"id": 1, "op": "get", "keys": []}', '{"id": 1, "op": "new", "max_bytes": 4, "object_nbytes": 0}']
)
def test_an_op_without_a_store_ends_the_port_with_status_3(port: Port, first: str) -> None:
    port.send(first)
    if '"new"' in first:  # a failed new leaves no store, as in auxspec serve
        assert json.loads(port.answer())["error"] == "config"
        port.send('{"id": 2, "op": "snapshot"}')
    # else the get itself ends the port: a second line could meet a closed pipe (the race was a flake)
    status, stderr = port.finish()
    assert status == 3
    assert "before any store" in stderr


# ------------------------------------------------------------- pipelining


@pytest.mark.timeout(120)
def test_pipelined_traces_match_the_model(auxport: Path) -> None:
    """With --batch the port speaks protocol 2 and takes messages of many
    requests (docs/protocol.md, "Pipelining"); the compare loop judges its
    answers with snapshots after every op, as it judges lone answers."""
    made = process_target(f"{shlex.quote(str(auxport))} --batch")
    try:
        assert made.handshake.capabilities == {"batch", "read_into", "snapshot"}
        assert made.target.ahead is not None  # the traces go in messages
        rng = random.Random(20261207)
        for number in range(300):
            data = rng.randbytes(rng.randint(4, 200))
            found = compare(decode(data, "strict", made.target.features), made.target)
            assert found is None, f"trace {number} (input {data.hex()}): {found.render()}"
    finally:
        made.close()


def test_without_batch_the_port_stays_protocol_1(auxport: Path) -> None:
    made = process_target(shlex.quote(str(auxport)))
    try:
        assert made.handshake.protocol == 1 and made.target.ahead is None
    finally:
        made.close()


def test_the_documented_message(auxport: Path) -> None:
    doc = (ROOT / "docs" / "protocol.md").read_text()
    section = doc.split("## Pipelining: the `batch` capability", 1)[1].split("```text", 1)[1].split("```", 1)[0]
    sent = [line[2:] for line in section.splitlines() if line.startswith("> ")]
    answered = [json.loads(line[2:]) for line in section.splitlines() if line.startswith("< ")]
    lines = "\n".join(['{"id": 1, "op": "hello", "protocol": 2}', *sent]) + "\n"
    done = subprocess.run(
        [str(auxport), "--batch"], input=lines, capture_output=True, text=True, timeout=TIMEOUT, check=False
    )
    assert done.returncode == 0, done.stderr
    got = [json.loads(line) for line in done.stdout.splitlines()[1:]]
    strip = [[{k: v for k, v in a.items() if k != "message"} for a in answers] for answers in got]
    assert strip == [[{k: v for k, v in a.items() if k != "message"} for a in answers] for answers in answered]
