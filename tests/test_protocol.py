"""The port protocol end to end: auxspec serve behind --exec, and ports that
misbehave in every way the protocol names."""

from __future__ import annotations

import io
import json
import shlex
import sys
import textwrap
from pathlib import Path

import jsonschema
import pytest

from auxspec import cli
from auxspec.drivers.protocol import offer_of, schema, serve
from auxspec.engine import traces
from auxspec.engine.target import load_target
from auxspec.reference.store import ReferenceStore

PY = shlex.quote(sys.executable)
SERVE = f"{PY} -m auxspec.cli serve"


def _verify(*args: str) -> int:
    return cli.main(["verify", *args, "--max-time", "4", "--seed", "3", "--op-timeout", "3", "--out", "/dev/null"])


@pytest.mark.timeout(400)  # two whole runs, each with the whole small scope over the protocol (a loaded machine)
def test_serve_behind_exec_conforms() -> None:
    assert _verify("--exec", SERVE) == 0
    assert _verify("--exec", f"{SERVE} auxspec:ReferenceStore") == 0


def test_the_documented_exchange() -> None:
    doc = (Path(__file__).parents[1] / "docs" / "protocol.md").read_text()
    exchange = doc.split("## A full exchange", 1)[1].split("```text", 1)[1].split("```", 1)[0]
    sent = [line[2:] for line in exchange.splitlines() if line.startswith("> ")]
    answered = [json.loads(line[2:]) for line in exchange.splitlines() if line.startswith("< ")]
    out = io.StringIO()
    target = load_target("auxspec:ReferenceStore")
    assert serve(target.factory, io.StringIO("\n".join(sent) + "\n"), out, offer=offer_of(target)) == 0
    got = [json.loads(line) for line in out.getvalue().splitlines()]
    # Every line of it, both ways, is a message of the shipped schema, and
    # each answer is one its request's op may have.
    validator = jsonschema.Draft202012Validator(schema())
    for request, answer in zip(sent, got, strict=True):
        validator.validate(json.loads(request))
        validator.validate(answer)
        op = json.loads(request)["op"]
        answers = {**schema(), "$ref": f"#/$defs/answers/{op}"}
        answers.pop("oneOf")
        jsonschema.Draft202012Validator(answers).validate(answer)
    # Messages are free text; ids, values and kinds must be exactly the doc's.
    assert [{k: v for k, v in g.items() if k != "message"} for g in got] == [
        {k: v for k, v in a.items() if k != "message"} for a in answered
    ]


def test_serve_rejects_non_protocol_input() -> None:
    factory = lambda m, n: ReferenceStore(max_bytes=m, object_nbytes=n)  # noqa: E731
    assert serve(factory, io.StringIO("not json\n"), io.StringIO()) == 3
    assert serve(factory, io.StringIO('{"op": "new"}\n'), io.StringIO()) == 3
    assert serve(factory, io.StringIO('{"id": 1, "op": "get", "keys": []}\n'), io.StringIO()) == 3
    # An integer longer than int() takes is a ValueError, not a JSONDecodeError (found by the trace fuzzer).
    assert serve(factory, io.StringIO('{"id": ' + "1" * 5000 + "}\n"), io.StringIO()) == 3


def _port(tmp_path: Path, body: str) -> str:
    """A port in Python whose answers are bent by ``body``, a function
    ``answer(request, good) -> line or None`` given the spec's good answer."""
    script = tmp_path / "port.py"
    script.write_text(
        textwrap.dedent(
            """
            import io, json, sys
            from auxspec.drivers.protocol import serve
            from auxspec.reference.store import ReferenceStore

            factory = lambda m, n: ReferenceStore(max_bytes=m, object_nbytes=n)
            seen = {"n": 0, "news": 0}
            """
        )
        + textwrap.dedent(body)
        + textwrap.dedent(
            """
            state = {"out": io.StringIO(), "store": None}
            for line in sys.stdin:
                request = json.loads(line)
                seen["n"] += 1
                out = io.StringIO()
                serve(factory, io.StringIO(REPLAY(line)), out)
                good = json.loads(out.getvalue().splitlines()[-1])
                reply = answer(request, good)
                if reply is not None:
                    print(reply, flush=True)
            """
        )
    )
    return f"{PY} {shlex.quote(str(script))}"


# Each port replays every request so far into a fresh serve() so that it has
# the right state; REPLAY keeps the history.
HISTORY = """
history = []
def REPLAY(line):
    history.append(line)
    return "".join(history)
"""


# Broken from the first request: a port that cannot be verified (exit 2).
AT_START = [
    ("wrong id", "def answer(request, good):\n    return json.dumps({**good, 'id': good['id'] + 1})\n"),
    ("unknown kind", "def answer(request, good):\n    return json.dumps({'id': good['id'], 'error': 'weird'})\n"),
    ("both fields", "def answer(request, good):\n    return json.dumps({**good, 'ok': None, 'error': 'type'})\n"),
    ("huge number", "def answer(request, good):\n    return '{\"id\": ' + '9' * 5000 + '}'\n"),
]
# Broken in mid-trace, after answering well: a counterexample like any other.
MID_TRACE = [
    ("crash", "def answer(request, good):\n    if seen['n'] == 3: sys.exit(7)\n    return json.dumps(good)\n"),
    (
        "hang",
        "import time\ndef answer(request, good):\n"
        "    if seen['n'] == 3: time.sleep(60)\n    return json.dumps(good)\n",
    ),
    ("garbage", "def answer(request, good):\n    return 'hello' if seen['n'] == 3 else json.dumps(good)\n"),
    (
        "wrong type",
        "def answer(request, good):\n"
        "    if request['op'] == 'get':\n        return json.dumps({'id': good['id'], 'ok': 12})\n"
        "    return json.dumps(good)\n",
    ),
]


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("name", "body"), AT_START, ids=[name for name, _ in AT_START])
def test_ports_broken_from_the_start_are_target_errors(
    tmp_path: Path, name: str, body: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _verify("--exec", _port(tmp_path, HISTORY + body)) == 2, name
    assert "broke the protocol" in capsys.readouterr().err


@pytest.mark.timeout(300)
@pytest.mark.parametrize(("name", "body"), MID_TRACE, ids=[name for name, _ in MID_TRACE])
def test_a_port_that_breaks_in_mid_trace_is_a_counterexample(
    tmp_path: Path, name: str, body: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "divergence.jsonl"
    port = _port(tmp_path, HISTORY + body)
    args = ["--exec", port, "--max-time", "20", "--seed", "3", "--op-timeout", "1", "--out", str(out)]
    code = cli.main(["verify", *args])
    shown = capsys.readouterr().out
    assert code == 1, shown
    assert "the port broke" in shown
    vector = traces.load(out)  # a vector of the trace up to the op that broke it
    assert 1 <= len(vector.trace.ops) <= 6, shown


@pytest.mark.timeout(120)
def test_a_port_that_ignores_new_diverges(tmp_path: Path) -> None:
    # Answers the first store's requests correctly, then never resets: the
    # next trace's `new` leaves the old state in place.
    body = HISTORY + textwrap.dedent(
        """
        def REPLAY(line, _inner=REPLAY):
            if json.loads(line)["op"] == "new" and any('"new"' in seen for seen in history):
                return "".join(history)  # ignore it: the old store stays
            return _inner(line)
        def answer(request, good):
            if request["op"] == "new" and seen["n"] > 2:  # after the handshake and the first new
                return json.dumps({"id": request["id"], "ok": None})
            return json.dumps(good)
        """
    )
    assert _verify("--exec", _port(tmp_path, body)) == 1


def test_exec_and_target_together_is_a_usage_error() -> None:
    assert _verify("auxspec:ReferenceStore", "--exec", SERVE) == 2
    assert _verify("--exec", "/no/such/program") == 2
