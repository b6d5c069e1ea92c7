"""Protocol 2: the handshake, and verify driving exactly what a port declares.

``tests/ports/v2_port.py`` declares ``read_into`` and ``stats`` and nothing
else (no observations, no snapshot); it logs every request's op and, asked
for anything it did not declare, exits 3 (``serve`` refuses it), so a run
that conforms has sent nothing undeclared. Protocol 1 ports (no handshake)
are ``serve`` without an offer and, in tests/test_c_port.py, the C port.
"""

from __future__ import annotations

import io
import json
import shlex
import sys
from collections import Counter
from pathlib import Path

import pytest

from auxspec import cli
from auxspec.drivers.protocol import V1, Handshake, Offer, offer_of, process_target, serve
from auxspec.engine.codec import decode
from auxspec.engine.ops import ALL, CORE, OBSERVE, READ_INTO, STATS, Contains, Flush, Len, ReadInto, Stats
from auxspec.engine.table import TABLE, kind_of, trace_needs
from auxspec.engine.target import load_target, upstream_path
from auxspec.reference.store import ReferenceStore

PY = shlex.quote(sys.executable)
V2_PORT = Path(__file__).parent / "ports" / "v2_port.py"
VECTORS = Path(__file__).parents[1] / "spec" / "auxspec" / "vectors"
CORE_VECTOR = VECTORS / "strict" / "capacity-one.jsonl"  # put, get and close only


def _v2(bug: str, log: Path) -> str:
    return f"{PY} {shlex.quote(str(V2_PORT))} {bug} {shlex.quote(str(log))}"


def _verify(*args: str, seconds: int = 4) -> int:
    return cli.main(["verify", *args, "--max-time", str(seconds), "--seed", "3", "--op-timeout", "5"])


def _ops(log: Path) -> Counter[str]:
    return Counter(log.read_text().split())


# ------------------------------------------------------------------ the handshake


def test_serve_answers_the_handshake_with_its_offer() -> None:
    out = io.StringIO()
    offer = Offer(frozenset({"stats", "read_into"}))
    factory = lambda m, n: ReferenceStore(max_bytes=m, object_nbytes=n)  # noqa: E731
    assert serve(factory, io.StringIO('{"id": 1, "op": "hello", "protocol": 2}\n'), out, offer=offer) == 0
    assert json.loads(out.getvalue()) == {"id": 1, "ok": {"protocol": 2, "capabilities": ["read_into", "stats"]}}
    # Without an offer serve is a protocol 1 port: hello is an error answer.
    out = io.StringIO()
    assert serve(factory, io.StringIO('{"id": 1, "op": "hello", "protocol": 2}\n'), out) == 0
    assert json.loads(out.getvalue())["error"] == "unsupported"


def test_serve_refuses_what_it_did_not_declare() -> None:
    factory = lambda m, n: ReferenceStore(max_bytes=m, object_nbytes=n)  # noqa: E731
    new = '{"id": 1, "op": "new", "max_bytes": 4, "object_nbytes": 2}\n'
    for op, line in (
        ("len", '{"id": 2, "op": "len"}'),
        ("snapshot", '{"id": 2, "op": "snapshot"}'),
        ("read_into", '{"id": 2, "op": "read_into", "keys": [], "buffer": 0}'),
    ):
        err = io.StringIO()
        code = serve(factory, io.StringIO(new + line + "\n"), io.StringIO(), err, offer=Offer(frozenset({"stats"})))
        assert code == 3, op
        assert "did not declare" in err.getvalue(), err.getvalue()


def test_what_a_python_target_offers() -> None:
    reference = offer_of(load_target("auxspec:ReferenceStore"))
    assert reference.capabilities == {"read_into", "observe", "stats", "snapshot", "batch"}
    bundled = offer_of(load_target(None))
    assert {"read_into", "observe", "stats", "snapshot", "background"} <= bundled.capabilities


def test_handshake_features() -> None:
    assert V1.features == CORE
    shake = Handshake(2, frozenset({"read_into", "stats"}))
    assert shake.features == {READ_INTO, STATS}
    assert any("flush, len, in and with" in line and "snapshot" in line for line in shake.skipped())
    assert Handshake(2, frozenset()).features == frozenset()
    with_bg = Handshake(2, frozenset({"observe", "background"}), ("teleport",))
    assert with_bg.features == {OBSERVE}
    said = "\n".join(with_bg.skipped())
    assert "background store: declared, but not driven" in said and "teleport" in said


# ------------------------------------------- the generator draws only what is declared


@pytest.mark.parametrize(
    "features",
    [frozenset(), frozenset({STATS}), frozenset({READ_INTO, STATS}), frozenset({OBSERVE}), CORE],
    ids=lambda f: "+".join(sorted(f)) or "none",
)
def test_decode_draws_only_declared_ops(features: frozenset[str]) -> None:
    seen: Counter[str] = Counter()
    for seed in range(1500):
        data = bytes((seed * 7919 + i * 104729) % 256 for i in range(200))
        data = bytes([(seed % 2) * 200]) + data  # the classic and the scaled scope
        trace = decode(data, "strict", features)
        assert trace_needs(trace) <= features, trace
        seen.update(kind_of(op).name for op in trace.ops)
    # What is declared is drawn, not only allowed.
    for row in TABLE:
        if row.feature is not None and row.feature in features:
            assert seen[row.name] > 0, (row.name, seen)


def test_decode_with_every_feature_is_unchanged_by_the_split() -> None:
    # STATS split from OBSERVE: a full-featured target decodes as before, with
    # stats still one of the observation group (one more byte picks it).
    found = set()
    for seed in range(400):
        data = bytes((seed * 31 + i * 17) % 256 for i in range(120))
        found.update(type(op) for op in decode(data, "strict", ALL).ops)
    assert {Stats, Len, Contains, Flush, ReadInto} <= found


# ------------------------------------------------------------ verify over the protocol


@pytest.mark.timeout(120)
def test_a_v2_port_is_verified_on_what_it_declares(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "ops.log"
    assert _verify("--exec", _v2("none", log), "--out", str(tmp_path / "d.jsonl")) == 0
    out = capsys.readouterr().out
    assert "(protocol 2)" in out and "conforms" in out
    assert "not declared, so not driven: the observations flush, len, in and with, snapshot" in out
    ops = _ops(log)
    assert ops["read_into"] > 0 and ops["stats"] > 0, ops
    assert ops["hello"] == 1, ops
    assert not {"flush", "len", "contains", "enter", "exit", "snapshot"} & set(ops), ops


@pytest.mark.timeout(180)
@pytest.mark.parametrize(("bug", "op"), [("stats", "stats()"), ("read-into", "read_into(")])
def test_a_v2_ports_declared_ops_are_searched(
    tmp_path: Path, bug: str, op: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Only a vector of put, get and close: the search itself must reach the
    # declared op to find the planted bug in it.
    out = tmp_path / "d.jsonl"
    args = ["--exec", _v2(bug, tmp_path / "ops.log"), "--vectors", str(CORE_VECTOR), "--out", str(out)]
    assert _verify(*args, seconds=12) == 1
    shown = capsys.readouterr().out
    marked = [line for line in shown.splitlines() if line.startswith(">>")]
    assert marked and op in marked[0], shown


@pytest.mark.timeout(120)
def test_a_v1_port_still_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # serve without an offer: answers hello with an error, then is driven as before.
    script = tmp_path / "v1.py"
    script.write_text(
        "import sys\nfrom auxspec.drivers.protocol import serve\nfrom auxspec.reference.store import ReferenceStore\n"
        "sys.exit(serve(lambda m, n: ReferenceStore(max_bytes=m, object_nbytes=n)))\n"
    )
    assert _verify("--exec", f"{PY} {shlex.quote(str(script))}", "--out", str(tmp_path / "d.jsonl")) == 0
    out = capsys.readouterr().out
    assert "protocol 1 (no handshake)" in out and "conforms" in out


def test_a_v1_port_that_exits_on_hello_is_restarted(tmp_path: Path) -> None:
    # The old serve: an unknown op ends it with status 3, as the C port does.
    script = tmp_path / "v1_exits.py"
    script.write_text(
        "import json, sys\n"
        "for line in sys.stdin:\n"
        "    request = json.loads(line)\n"
        "    if request['op'] != 'new':\n"
        "        sys.exit(3)\n"
        "    print(json.dumps({'id': request['id'], 'ok': None}), flush=True)\n"
    )
    made = process_target(f"{PY} {shlex.quote(str(script))}", 5.0)
    try:
        assert made.handshake == V1
        assert made.target.features == CORE
        made.target.factory(4, 2)  # the restarted process answers, from id 1
        assert made.ports.port.next_id == 2
    finally:
        made.close()


@pytest.mark.timeout(120)
@pytest.mark.skipif(upstream_path() is None, reason="needs vLLM's module (../shared/upstream or AUXSTORE_UPSTREAM)")
def test_serve_of_vllm_declares_no_read_into(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    serve_vllm = f"{PY} -m auxspec.cli serve {shlex.quote(str(upstream_path()))}"
    code = _verify("--exec", serve_vllm, "--profile", "upstream", "--out", str(tmp_path / "d.jsonl"))
    captured = capsys.readouterr()
    assert code == 0, captured.out + captured.err
    assert "Traceback" not in captured.err
    assert "not declared, so not driven: read_into" in captured.out


# ------------------------------------------------------------------ the wheel


@pytest.mark.timeout(300)
def test_the_wheel_ships_the_protocol_page_and_schema(tmp_path: Path) -> None:
    """Built as pip builds it; the schema inside validates a real exchange
    (one recorded from verify talking to a port through a tee)."""
    import subprocess
    import zipfile

    import jsonschema

    root = Path(__file__).parents[1]
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(root)],
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    if built.returncode != 0 and "hatchling" in built.stderr:
        pytest.skip(f"cannot build the wheel here: {built.stderr.strip()[-300:]}")
    assert built.returncode == 0, built.stderr
    (wheel,) = tmp_path.glob("auxstore-*.whl")
    with zipfile.ZipFile(wheel) as zipped:
        page = zipped.read("auxspec/docs/protocol.md").decode()
        shipped = json.loads(zipped.read("auxspec/schemas/protocol.schema.json"))
    assert page == (root / "docs" / "protocol.md").read_text()
    # A real exchange: verify (one vector, no search) talking to the v2 test port, recorded.
    log = tmp_path / "wire.log"
    tee = tmp_path / "tee.py"
    tee.write_text(
        "import subprocess, sys, threading\n"
        f"log = open({str(log)!r}, 'w')\n"
        f"port = subprocess.Popen([sys.executable, {str(V2_PORT)!r}], stdin=subprocess.PIPE, stdout=subprocess.PIPE,"
        " text=True, bufsize=1)\n"
        "def back():\n"
        "    for line in port.stdout:\n"
        "        log.write('< ' + line); log.flush(); sys.stdout.write(line); sys.stdout.flush()\n"
        "threading.Thread(target=back, daemon=True).start()\n"
        "for line in sys.stdin:\n"
        "    log.write('> ' + line); log.flush(); port.stdin.write(line); port.stdin.flush()\n"
        "port.stdin.close(); port.wait()\n"
    )
    vector = VECTORS / "strict" / "read-into.jsonl"
    code = cli.main(["verify", "--exec", f"{PY} {shlex.quote(str(tee))}", "--vectors", str(vector), "--max-time", "0"])
    assert code == 0
    lines = log.read_text().splitlines()
    requests = [json.loads(line[2:]) for line in lines if line.startswith("> ")]
    answers = {json.loads(line[2:])["id"]: json.loads(line[2:]) for line in lines if line.startswith("< ")}
    assert {r["op"] for r in requests} >= {"hello", "new", "put", "read_into"}
    validator = jsonschema.Draft202012Validator(shipped)
    for request in requests:
        validator.validate(request)
        by_op = {key: value for key, value in shipped.items() if key != "oneOf"}
        jsonschema.Draft202012Validator({**by_op, "$ref": f"#/$defs/answers/{request['op']}"}).validate(
            answers[request["id"]]
        )
    # and the schema refuses what the protocol refuses
    for bad in ({"id": True, "ok": None}, {"id": 1, "ok": None, "error": "type"}, {"id": 1, "error": "weird"}):
        assert not validator.is_valid(bad), bad


def test_the_schema_names_what_the_code_does() -> None:
    from auxspec.drivers.protocol import CAPABILITIES, KINDS, OK_VALUES, schema
    from auxspec.engine.table import BY_NAME, STATS_FIELDS

    shipped = schema()["$defs"]
    assert set(shipped["error"]["properties"]["error"]["enum"]) == KINDS
    assert tuple(shipped["stats"]["required"]) == STATS_FIELDS
    assert set(shipped["requests"]) == set(BY_NAME) | {"hello", "new", "snapshot"} == set(OK_VALUES)
    assert set(shipped["answers"]) == set(OK_VALUES)
    for name in CAPABILITIES:
        assert (
            name
            in shipped["answers"]["hello"]["anyOf"][0]["properties"]["ok"]["properties"]["capabilities"]["description"]
        )
