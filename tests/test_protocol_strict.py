"""The strict protocol (issue 18, point 5): a malformed or wrong-typed answer
is a broken port (a counterexample once it has answered), never "conforms";
every wait on a port is bounded; options, files and requests that are not
what they must be end cleanly with the documented exit codes.

The misbehaving ports are ``tests/ports/bent_port.py``: the reference store
behind ``serve``, with one way of bending its answers each.
"""

from __future__ import annotations

import io
import json
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from auxspec import cli
from auxspec.drivers import protocol
from auxspec.drivers.protocol import Offer, ProtocolError, check_answer, process_target, serve
from auxspec.drivers.verify import load_vectors
from auxspec.engine import traces
from auxspec.engine.compare import Divergence, compare
from auxspec.engine.table import trace_needs
from auxspec.engine.traces import TraceError
from auxspec.reference.store import ReferenceStore

PY = shlex.quote(sys.executable)
BENT = Path(__file__).parent / "ports" / "bent_port.py"
VECTORS = Path(__file__).parents[1] / "spec" / "auxspec" / "vectors" / "strict"


def _bent(bend: str, start: int = 3) -> str:
    return f"{PY} {shlex.quote(str(BENT))} {bend} {start}"


def _first_divergence(command: str, op_timeout: float = 2.0) -> Divergence | None:
    """Replay the bundled strict vectors the port can run; the first divergence."""
    made = process_target(command, op_timeout)
    try:
        for vector in load_vectors([VECTORS]):
            if trace_needs(vector.trace) <= made.target.features:
                found = compare(vector.trace, made.target)
                if found is not None:
                    return found
        return None
    finally:
        made.close()


# ------------------------------------------------------------ answers, one by one

STATS_OK = {"stored": 0, "capacity": 1, "pinned": 0, "hits": 0, "misses": 0, "evictions": 0, "capacity_failures": 0}
MALFORMED: list[tuple[str, Any]] = [
    ("put", {"id": 1, "ok": 0}),
    ("put", {"id": 1, "ok": ""}),
    ("close", {"id": 1, "ok": False}),
    ("put", {"id": True, "ok": None}),
    ("put", {"id": 1.0, "ok": None}),
    ("put", {"id": 2, "ok": None}),
    ("put", {"id": 1, "ok": None, "error": "type"}),
    ("put", {"id": 1}),
    ("put", {"id": 1, "ok": None, "debug": 1}),
    ("put", {"id": 1, "error": "weird"}),
    ("put", {"id": 1, "error": "unsupported"}),
    ("put", {"id": 1, "error": "type", "message": 3}),
    ("get", {"id": 1, "ok": 12}),
    ("get", {"id": 1, "ok": "0A"}),
    ("get", {"id": 1, "ok": " 0a"}),
    ("get", {"id": 1, "ok": "abc"}),
    ("len", {"id": 1, "ok": "2"}),
    ("len", {"id": 1, "ok": True}),
    ("len", {"id": 1, "ok": -1}),
    ("len", {"id": 1, "ok": 10**30}),
    ("contains", {"id": 1, "ok": 1}),
    ("stats", {"id": 1, "ok": {k: str(v) for k, v in STATS_OK.items()}}),
    ("stats", {"id": 1, "ok": {**STATS_OK, "capacity": True}}),
    ("stats", {"id": 1, "ok": {**STATS_OK, "extra": 0}}),
    ("snapshot", {"id": 1, "ok": {"entries": [], "references": [], "closed": 0}}),
    ("snapshot", {"id": 1, "ok": {"entries": [["a", "zz"]], "references": [], "closed": False}}),
    ("snapshot", {"id": 1, "ok": {"entries": [], "references": [["a", "1"]], "closed": False}}),
    ("snapshot", {"id": 1, "ok": {"entries": [], "references": []}}),
]


@pytest.mark.parametrize(("op", "reply"), MALFORMED, ids=[f"{op}-{json.dumps(r)}" for op, r in MALFORMED])
def test_a_malformed_answer_is_refused(op: str, reply: Any) -> None:
    with pytest.raises(protocol._Broken):
        check_answer(op, reply, 1)


def test_well_formed_answers_pass() -> None:
    for op, reply in [
        ("put", {"id": 1, "ok": None}),
        ("get", {"id": 1, "ok": "0a0b"}),
        ("len", {"id": 1, "ok": 0}),
        ("contains", {"id": 1, "ok": False}),
        ("stats", {"id": 1, "ok": STATS_OK}),
        ("put", {"id": 1, "error": "capacity", "message": "full"}),
        ("snapshot", {"id": 1, "ok": {"entries": [["a", "00"]], "references": [["a", 2]], "closed": False}}),
    ]:
        assert check_answer(op, reply, 1) is reply


# ------------------------------------------------------------------- bent ports

MID_RUN = [
    "put-ok",
    "close-ok",
    "id-true",
    "counts-as-strings",
    "closed-as-int",
    "contains-as-int",
    "len-huge",
    "get-uppercase",
    "get-spaced",
    "extra-field",
    "deep",
    "deep-20",
    "id-huge",
    "no-newline",
    "close-stdout",
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("bend", MID_RUN)
def test_a_bent_port_is_a_counterexample(bend: str) -> None:
    found = _first_divergence(_bent(bend))
    assert found is not None, f"{bend}: conforms"
    assert found.actual.startswith("the port broke"), found.render()


@pytest.mark.timeout(60)
def test_a_straight_port_conforms_on_every_vector() -> None:
    # The same port unbent: the bends, not the port, are what is refused.
    assert _first_divergence(_bent("none")) is None


@pytest.mark.timeout(120)
def test_verify_of_a_bent_port_never_conforms(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "d.jsonl"
    args = ["verify", "--exec", _bent("put-ok"), "--max-time", "3", "--op-timeout", "2", "--out", str(out)]
    assert cli.main(args) == 1
    shown = capsys.readouterr().out
    assert "conforms" not in shown and "must have ok null" in shown
    # Broken from its first answer (the handshake), it cannot be verified at all.
    assert cli.main([*args[:2], _bent("id-true", 1), *args[3:]]) == 2
    assert "broke the protocol" in capsys.readouterr().err


def test_a_handshake_with_protocol_true_is_refused() -> None:
    with pytest.raises(ProtocolError, match="protocol True"):
        process_target(_bent("hello-protocol-true", 1), 2.0)


@pytest.mark.timeout(60)
def test_a_port_whose_child_keeps_stderr_open_after_it_exits(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    os.environ["CHILD_PID_FILE"] = str(pid_file)
    try:
        found = _first_divergence(_bent("exit-keeping-stderr"))
    finally:
        del os.environ["CHILD_PID_FILE"]
        if pid_file.exists():
            os.kill(int(pid_file.read_text()), signal.SIGKILL)  # the sleep the port started
    assert found is not None and "exited with status 5" in found.actual, found


@pytest.mark.timeout(120)
def test_a_chatty_port_is_drained() -> None:
    # 100 bytes of stderr per request: far past a pipe's 64 KiB, which the
    # port would block on if nobody read it.
    made = process_target(_bent("chatty"), 5.0)
    try:
        store = made.target.factory(4, 2)
        for _ in range(3000):
            assert store.get_concatenated([]) == b""
    finally:
        made.close()
    tail = made.ports.port.stderr_tail()  # kept once it exited: hello, new, then 3000 gets
    assert tail.endswith("request   3002: " + "." * 82) and len(tail) <= protocol.STDERR_TAIL, tail


# ---------------------------------------------------------------------- options


@pytest.mark.parametrize(
    "option",
    [
        ["--op-timeout", "-1"],
        ["--op-timeout", "0"],
        ["--op-timeout", "nan"],
        ["--op-timeout", "inf"],
        ["--op-timeout", "1e308"],
        ["--op-timeout", "soon"],
        ["--max-time", "nan"],
        ["--max-time", "-5"],
        ["--exec", ""],
        ["--exec", "   "],
        ["--exec", "'unbalanced"],
        ["--exec", 'python -c "print(1)'],
    ],
    ids=lambda option: " ".join(option),
)
def test_an_invalid_option_is_a_usage_error(option: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["verify", *option])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "error: argument" in err, err


def test_min_coverage_must_be_a_percentage() -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["vectors", "--check", "--min-coverage", "nan"])
    assert exit_.value.code == 2


# -------------------------------------------------------------------- serve


def _serve(lines: str, factory: Any = None) -> tuple[int, list[Any], str]:
    out, err = io.StringIO(), io.StringIO()
    factory = factory or (lambda m, n: ReferenceStore(max_bytes=m, object_nbytes=n))
    code = serve(factory, io.StringIO(lines), out, err, offer=Offer(frozenset({"read_into"})))
    return code, [json.loads(line) for line in out.getvalue().splitlines()], err.getvalue()


def test_serve_refuses_deep_nesting_with_3() -> None:
    for depth in (20, 5000):
        code, _, err = _serve('{"id": 1, "op": "new", "max_bytes": ' + "[" * depth + "]" * depth + "}\n")
        assert code == 3 and "nested deeper than 16" in err, err


def test_serve_builds_a_store_of_2_to_the_70() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "auxspec.cli", "serve"],
        input='{"id": 1, "op": "new", "max_bytes": 1180591620717411303424, "object_nbytes": 2}\n'
        '{"id": 2, "op": "put", "objects": [["a", "0a0b"]], "retain": [], "release": []}\n'
        '{"id": 3, "op": "get", "keys": ["a"]}\n',
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert [json.loads(line) for line in done.stdout.splitlines()] == [
        {"id": 1, "ok": None},
        {"id": 2, "ok": None},
        {"id": 3, "ok": "0a0b"},
    ]


def test_serve_exit_codes() -> None:
    class Buggy(ReferenceStore):
        def get_concatenated(self, keys: Any) -> bytes:
            raise ZeroDivisionError("planted")

    new = '{"id": 1, "op": "new", "max_bytes": 4, "object_nbytes": 2}\n'
    code, answers, err = _serve(
        new + '{"id": 2, "op": "get", "keys": []}\n', lambda m, n: Buggy(max_bytes=m, object_nbytes=n)
    )
    assert code == 1 and answers == [{"id": 1, "ok": None}]
    assert "get raised ZeroDivisionError: planted" in err and "Traceback" not in err
    # After a failed new the port holds no store: a get is not the protocol.
    bad_new = '{"id": 1, "op": "new", "max_bytes": 4, "object_nbytes": 0}\n'
    code, answers, err = _serve(bad_new + '{"id": 2, "op": "get", "keys": []}\n')
    assert code == 3 and answers[0]["error"] == "config" and "before a store was built" in err
    done = subprocess.run(
        [sys.executable, "-m", "auxspec.cli", "serve", "no.such.module"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr


# ---------------------------------------------------------------- trace files

HEADER = {"format": "auxspec-trace", "version": 1, "name": "x", "profile": "strict", "max_bytes": 4,
          "object_nbytes": 2}  # fmt: skip


def test_deep_nesting_in_a_trace_file_is_a_clean_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "deep.jsonl"
    path.write_text(json.dumps(HEADER) + "\n" + '{"op": "get", "keys": ' + "[" * 100000 + "]" * 100000 + "}\n")
    with pytest.raises(TraceError, match="nested deeper than 16"):
        traces.load(path)
    assert cli.main(["verify", "--vectors", str(path), "--max-time", "0"]) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_a_version_of_true_is_refused() -> None:
    with pytest.raises(TraceError, match="version True is not supported"):
        traces.loads(json.dumps({**HEADER, "version": True}) + "\n")


def test_names_with_terminal_escapes_are_shown_safely() -> None:
    vector = traces.loads(json.dumps({**HEADER, "name": "\x1b[2J\x1b[31mred\u202e", "description": "\x07"}) + "\n")
    assert "\x1b" not in vector.name and "\u202e" not in vector.name and "\x07" not in vector.description
    assert vector.name == "\\x1b[2J\\x1b[31mred\\u202e"


def test_explain_exec_with_a_bad_timeout_is_a_clean_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "v.jsonl"
    path.write_text(json.dumps(HEADER) + "\n")
    for timeout in ("nan", "-1", "1e308"):  # 1e308 once overflowed select's timeout
        with pytest.raises(SystemExit) as exit_:
            cli.main(["explain", str(path), "--exec", _bent("none"), "--op-timeout", timeout])
        assert exit_.value.code == 2
        err = capsys.readouterr().err
        assert "positive number of seconds up to 86400" in err and "Traceback" not in err, err
